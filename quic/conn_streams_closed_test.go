package quic

import (
	"errors"
	"testing"
	"testing/synctest"
	"time"
)

// TestOpenStreamWhileDraining opens a stream on a connection that the
// peer has closed and that is draining (RFC 9000 §10.2.2: "While
// otherwise identical to the closing state, an endpoint in the draining
// state MUST NOT send any packets"): OpenStream fails with the peer's
// error at once. The connection's goroutine records the error again when
// it ends, after the drain; under the race detector this test caught
// OpenStream reading that record after it had released the lock.
func TestOpenStreamWhileDraining(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		n := newMemNet(5 * time.Millisecond)
		sep, err := NewEndpoint(n.listen(testServerAddr), testServerConfig(t, "hq-interop"))
		if err != nil {
			t.Fatal(err)
		}
		defer sep.Close()
		cep, _ := NewEndpoint(n.listen(testClientAddr), nil)
		defer cep.Close()
		go func() {
			sc, err := sep.Accept(t.Context())
			if err != nil {
				return
			}
			sc.Close(7, "bye")
		}()
		c, err := cep.Dial(t.Context(), "udp", testServerAddr, testClientConfig(t, "hq-interop"))
		if err != nil {
			t.Fatal(err)
		}
		// AcceptStream fails once the peer's CONNECTION_CLOSE is in: the
		// connection is draining, its goroutine still running.
		if _, err := c.AcceptStream(t.Context()); err == nil {
			t.Fatal("AcceptStream on a closed connection succeeded")
		}
		select {
		case <-c.Done():
			t.Fatal("the connection ended before its drain")
		default:
		}
		_, err = c.OpenStream(t.Context())
		var ae *ApplicationError
		if !errors.As(err, &ae) || ae.Code != 7 || !ae.Remote {
			t.Errorf("OpenStream while draining: %v, want the peer's application error 7", err)
		}
		<-c.Done()
	})
}
