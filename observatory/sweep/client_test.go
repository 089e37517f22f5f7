package sweep

import (
	"testing"

	"github.com/quiver-quic/quiver/peers"
)

// A release's client runs with the manifest's command line, written as
// the client-facing suite's template: the build's binary, the endpoint
// test case, the key log and the CA where the adapter takes one, and a
// resume command only for a client that can make a resumed connection.
func TestClientTargetFromManifest(t *testing.T) {
	for _, tc := range []struct {
		impl, cmd, resume string
	}{
		{"quic-go",
			"ROLE=client SSLKEYLOGFILE={keylog} TESTCASE=handshake '/c a/quicgo-peer' -output {outdir} -alpn hq-interop -ca {ca} {urls}",
			"ROLE=client SSLKEYLOGFILE={keylog} TESTCASE=zerortt '/c a/quicgo-peer' -output {outdir} -alpn hq-interop -ca {ca} {urls}"},
		{"go-x-net", "SSLKEYLOGFILE={keylog} TESTCASE=handshake '/c a/quicgo-peer' -output {outdir} {urls}", ""},
	} {
		pim, err := peers.Find(tc.impl)
		if err != nil {
			t.Fatal(err)
		}
		im, err := FindImpl(tc.impl)
		if err != nil {
			t.Fatal(err)
		}
		ct, err := ClientTarget(pim, TargetNameFor(im, RoleClient), "/c a/quicgo-peer")
		if err != nil {
			t.Fatal(err)
		}
		if ct.Name != tc.impl+" clients" || ct.ALPN != "hq-interop" {
			t.Errorf("%s: target %q ALPN %q", tc.impl, ct.Name, ct.ALPN)
		}
		if ct.Command != tc.cmd {
			t.Errorf("%s client command\n got %s\nwant %s", tc.impl, ct.Command, tc.cmd)
		}
		if ct.ResumeCommand != tc.resume {
			t.Errorf("%s resume command\n got %s\nwant %s", tc.impl, ct.ResumeCommand, tc.resume)
		}
	}
}

func TestSelectScenariosByRole(t *testing.T) {
	cli, err := SelectScenarios(RoleClient, []string{"cli-initial-datagram-size"})
	if err != nil || len(cli) != 1 {
		t.Fatalf("client scenarios = %v, %v", cli, err)
	}
	if _, err := SelectScenarios(RoleServer, []string{"cli-initial-datagram-size"}); err == nil {
		t.Error("a client-facing scenario was selected for the server role")
	}
}
