//go:build !linux

package conformance

import (
	"errors"
	"net/netip"
)

// dfObserver needs Linux raw sockets; elsewhere the DF bit stays unseen.
type dfObserver struct{}

func newDFObserver(netip.AddrPort) (*dfObserver, error) {
	return nil, errors.New("reading IPv4 headers is implemented on Linux only")
}

func (o *dfObserver) watchPort(uint16)            {}
func (o *dfObserver) counts() (withDF, total int) { return 0, 0 }
func (o *dfObserver) close()                      {}
