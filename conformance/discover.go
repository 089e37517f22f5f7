package conformance

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/quiver-quic/quiver/quic"
)

// discoveryTimeout bounds each discovery handshake.
const discoveryTimeout = 4 * time.Second

// Discover builds the target profile: the application protocols the target
// accepts (hq-interop, then h3, unless the target names them) and the small
// resource.
func Discover(ctx context.Context, target Target) *Profile {
	p := &Profile{Target: target, SmallPath: target.SmallPath}
	if p.SmallPath == "" {
		p.SmallPath = "/"
	}
	if len(target.ALPN) > 0 {
		p.ALPNs = append([]string(nil), target.ALPN...)
		p.Reachable = true
		return p
	}
	candidates := []string{"hq-interop", "h3"}
	ok := make([]bool, len(candidates))
	answered := make([]bool, len(candidates))
	var wg sync.WaitGroup
	for i, alpn := range candidates {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sc := &Scenario{ID: "discovery", Family: "-"}
			t := &T{sc: sc, profile: p, rec: newRecorder(time.Now()), started: time.Now()}
			defer t.runCleanups()
			dctx, cancel := context.WithTimeout(ctx, discoveryTimeout)
			defer cancel()
			c, err := t.Dial(dctx, DialOptions{ALPN: []string{alpn}, HandshakeTimeout: discoveryTimeout})
			ok[i] = err == nil
			var te *quic.TransportError
			answered[i] = err == nil || errors.As(err, &te) || len(received(t.rec.snapshot(), c.trace.id, 0)) > 0
		}()
	}
	wg.Wait()
	for i, alpn := range candidates {
		if ok[i] {
			p.ALPNs = append(p.ALPNs, alpn)
		}
		if answered[i] {
			p.Reachable = true
		}
	}
	p.Target.ALPN = p.ALPNs
	return p
}
