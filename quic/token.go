package quic

import (
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic/wire"
)

// A TokenStore keeps NEW_TOKEN tokens by server (RFC 9000 §8.1.3). Put
// stores a token for key; Take returns one and forgets it, since a client
// "SHOULD NOT reuse a token" (§8.1.3). It must be safe for concurrent use.
type TokenStore interface {
	Put(key string, token []byte)
	Take(key string) []byte
}

// NewTokenStore returns an in-memory TokenStore that keeps the last few
// tokens of each server.
func NewTokenStore() TokenStore { return &memTokenStore{m: make(map[string][][]byte)} }

type memTokenStore struct {
	mu sync.Mutex
	m  map[string][][]byte
}

const tokensPerServer = 4

func (s *memTokenStore) Put(key string, token []byte) {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := append(s.m[key], append([]byte(nil), token...))
	if len(l) > tokensPerServer {
		l = l[len(l)-tokensPerServer:]
	}
	s.m[key] = l
}

func (s *memTokenStore) Take(key string) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	l := s.m[key]
	if len(l) == 0 {
		return nil
	}
	t := l[len(l)-1]
	s.m[key] = l[:len(l)-1]
	return t
}

// tokenKey names the server a token belongs to: its TLS server name and
// address.
func (c *Conn) tokenKey() string {
	return c.config.TLSConfig.ServerName + "|" + c.handshakeAddr.String()
}

// sendNewToken gives the client a token for its next connection, once
// the handshake is complete (RFC 9000 §8.1.3).
func (c *Conn) sendNewToken(now time.Time) {
	tok := c.ep.tokens.sealAddressToken(now, c.peerAddr.Addr())
	c.probeRT.inject[appSpace] = append(c.probeRT.inject[appSpace], &wire.NewTokenFrame{Token: tok})
	c.tokenAddr = c.peerAddr.Addr()
}

// newTokenAfterMigration gives a client whose new address the server
// just validated a fresh token. RFC 9000 §9.3: "After verifying a new
// client address, the server SHOULD send new address validation tokens
// (Section 8) to the client." Tokens name the IP only, so one given before
// a port change would still serve, but the SHOULD names any new address
// (path-new-token-after-validation warned on a port change), and a token
// is a few dozen bytes.
func (c *Conn) newTokenAfterMigration(now time.Time) {
	if c.isClient || !c.handshakeComplete || !c.tokenAddr.IsValid() {
		return
	}
	c.sendNewToken(now)
}

// onNewToken stores a token from the server.
func (c *Conn) onNewToken(f *wire.NewTokenFrame) {
	if c.config.TokenStore != nil && len(f.Token) > 0 {
		c.config.TokenStore.Put(c.tokenKey(), f.Token)
	}
}
