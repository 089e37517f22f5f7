package quic

import (
	"crypto/rand"
	"errors"
	"net"
	"time"
)

// Migrate moves a client connection to the local socket pc (RFC 9000 §9):
// from now on its packets leave from pc, under a new connection ID of the
// server's (§9.5: "An endpoint MUST NOT reuse a connection ID when sending
// from more than one local address"), and a PATH_CHALLENGE validates the
// new path. The connection takes ownership of pc. If the connection owned
// its previous socket (Dial), that socket is closed.
func (c *Conn) Migrate(pc net.PacketConn) error {
	if !c.isClient {
		return errors.New("quic: only a client migrates")
	}
	old := c.localEndpoint()
	ne, err := newEndpoint(pc, &Config{ConnectionIDLength: cidLenConfig(old.cidLen)}, false)
	if err != nil {
		return err
	}
	var merr error
	ok := c.run(contextBackground, func(now time.Time) {
		// §9: "An endpoint MUST NOT initiate connection migration before
		// the handshake is confirmed".
		if !c.handshakeConfirmed {
			merr = errors.New("quic: cannot migrate before the handshake is confirmed")
			return
		}
		// §18.2 disable_active_migration: "the endpoint MUST NOT use a
		// new local address when sending to the address that the peer
		// used during the handshake".
		// "This transport parameter does not prohibit connection
		// migration after a client has acted on a preferred_address
		// transport parameter."
		if c.havePeerTP && c.peerParams.tp.DisableActiveMigration && !c.pref.migrated {
			merr = errors.New("quic: the server disabled active migration")
			return
		}
		if len(c.peerCID) > 0 && !c.cids.usePeerCID() {
			merr = errors.New("quic: no spare connection ID from the server to migrate with")
			return
		}
		for _, e := range c.cids.local {
			ne.register(e.cid, c)
		}
		if ne.cidLen == 0 {
			ne.registerAddr(c.peerAddr, c)
		}
		// The old socket keeps delivering what is still in flight to it
		// until the connection ends; it must not answer with stateless
		// resets meanwhile.
		old.detach(c)
		c.mu.Lock()
		c.ep = ne
		c.oldEndpoints = append(c.oldEndpoints, oldEndpoint{old, c.ownsEndpoint})
		c.ownsEndpoint = true
		c.mu.Unlock()
		c.pmtudReset(now)
		rand.Read(c.cids.challenge[:])
		c.cids.challengePending = true
		c.cids.pathChallenge = append(c.cids.pathChallenge, c.cids.challenge)
		c.stats.migrations++
	})
	if !ok {
		ne.Close()
		return c.Err()
	}
	if merr != nil {
		ne.Close()
	}
	return merr
}

// localEndpoint returns the endpoint the connection sends from.
func (c *Conn) localEndpoint() *Endpoint {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ep
}

func cidLenConfig(n int) int {
	if n == 0 {
		return -1
	}
	return n
}

// oldEndpoint is an endpoint a connection migrated away from.
type oldEndpoint struct {
	ep    *Endpoint
	owned bool // the connection created it (Dial) and closes it
}

// releaseOldEndpoints drops the routes of old endpoints to c and closes
// those it owned.
func (c *Conn) releaseOldEndpoints() {
	c.mu.Lock()
	olds := c.oldEndpoints
	c.oldEndpoints = nil
	c.mu.Unlock()
	for _, o := range olds {
		o.ep.forget(c)
		if o.owned {
			o.ep.Close()
		}
	}
}
