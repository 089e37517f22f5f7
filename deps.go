//go:build tools

package quiver

import (
	_ "github.com/quic-go/qpack"
	_ "golang.org/x/crypto/chacha20poly1305"
	_ "golang.org/x/net/ipv4"
	_ "golang.org/x/sys/unix"
)
