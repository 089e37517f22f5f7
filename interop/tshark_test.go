package interop

import (
	"bytes"
	"context"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/quiver-quic/quiver/interop/analyze"
	"github.com/quiver-quic/quiver/pcap"
	"github.com/quiver-quic/quiver/quic/wire"
)

// tsharkView is what tshark reads from a capture, in the terms the
// analyzer is compared on.
type tsharkView struct {
	frames      map[int][]uint64 // frame number -> frame types, in order
	versions    []wire.Version
	keyPhases   [2][2]int // [direction][bit] short-header packet counts
	serverSCIDs map[string]bool
	hsDone      int
}

// readTshark runs tshark over a capture whose key log is embedded.
func readTshark(t *testing.T, tshark, path string, server netip.AddrPort) *tsharkView {
	t.Helper()
	cmd := exec.Command(tshark, "-r", path, "-T", "fields", "-E", "separator=|", "-E", "occurrence=a", "-E", "aggregator=,",
		"-e", "frame.number", "-e", "ip.src", "-e", "ipv6.src", "-e", "udp.srcport",
		"-e", "quic.long.packet_type", "-e", "quic.version", "-e", "quic.key_phase", "-e", "quic.scid", "-e", "quic.frame_type")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.Bytes())
	}
	v := &tsharkView{frames: map[int][]uint64{}, serverSCIDs: map[string]bool{}}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		f := strings.Split(line, "|")
		if len(f) != 9 {
			t.Fatalf("tshark line %q", line)
		}
		n, _ := strconv.Atoi(f[0])
		src := f[1] + f[2]
		port, _ := strconv.Atoi(f[3])
		addr, err := netip.ParseAddr(src)
		if err != nil {
			t.Fatalf("tshark address %q", src)
		}
		dir := 0
		if netip.AddrPortFrom(addr, uint16(port)) == server {
			dir = 1
		}
		for _, x := range split(f[5]) {
			u, _ := strconv.ParseUint(x, 0, 32)
			if !slices.Contains(v.versions, wire.Version(u)) {
				v.versions = append(v.versions, wire.Version(u))
			}
		}
		for _, x := range split(f[6]) {
			b := 0
			if x == "1" || x == "True" {
				b = 1
			}
			v.keyPhases[dir][b]++
		}
		types, scids := split(f[4]), split(f[7])
		for i, ty := range types {
			if dir == 1 && ty == "0" && i < len(scids) {
				v.serverSCIDs[scids[i]] = true
			}
		}
		for _, x := range split(f[8]) {
			u, _ := strconv.ParseUint(x, 0, 64)
			v.frames[n] = append(v.frames[n], u)
			if dir == 1 && u == uint64(wire.FrameTypeHandshakeDone) {
				v.hsDone++
			}
		}
	}
	slices.Sort(v.versions)
	return v
}

func split(s string) []string {
	if s == "" {
		return nil
	}
	return strings.Split(s, ",")
}

// compareWithTshark checks the analyzer against tshark on one capture:
// handshake count, versions, key phases per direction and the frame types
// of every datagram.
func compareWithTshark(t *testing.T, tshark, path string, server netip.AddrPort) {
	t.Helper()
	c, err := pcap.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := analyze.Analyze(c, analyze.Options{ServerAddrs: []netip.AddrPort{server}})
	if err != nil {
		t.Fatal(err)
	}
	ts := readTshark(t, tshark, path, server)
	name := filepath.Base(path)

	done, attempts := tr.Handshakes()
	hsDone := 0
	for _, cn := range tr.Conns {
		hsDone += cn.FrameCounts[analyze.FromServer]["HANDSHAKE_DONE"]
	}
	if attempts != len(ts.serverSCIDs) || hsDone != ts.hsDone {
		t.Errorf("%s: analyzer %d handshake attempts, %d HANDSHAKE_DONE; tshark %d server Initial SCIDs, %d HANDSHAKE_DONE", name, attempts, hsDone, len(ts.serverSCIDs), ts.hsDone)
	}
	var versions []wire.Version
	for _, p := range tr.Packets {
		if p.Type.IsLong() && p.Type != wire.PacketTypeVersionNegotiation && !slices.Contains(versions, p.Version) {
			versions = append(versions, p.Version)
		}
	}
	slices.Sort(versions)
	if !slices.Equal(versions, ts.versions) {
		t.Errorf("%s: analyzer versions %v, tshark %v", name, versions, ts.versions)
	}
	var kp [2][2]int
	for _, cn := range tr.Conns {
		for d := range 2 {
			kp[d][0] += cn.KeyPhases[d].Packets[0]
			kp[d][1] += cn.KeyPhases[d].Packets[1]
		}
	}
	if kp != ts.keyPhases {
		t.Errorf("%s: analyzer key phases [client, server][0, 1] %v, tshark %v", name, kp, ts.keyPhases)
	}
	frames := map[int][]uint64{}
	for _, p := range tr.Packets {
		for _, f := range p.Frames {
			frames[p.Datagram+1] = append(frames[p.Datagram+1], uint64(f.Type))
		}
	}
	mismatches := 0
	for n := 1; n <= len(c.Packets); n++ {
		a, b := frames[n], ts.frames[n]
		if !slices.Equal(a, b) {
			if mismatches < 5 {
				t.Errorf("%s frame %d: analyzer frame types %v, tshark %v", name, n, a, b)
			}
			mismatches++
		}
	}
	if mismatches > 0 {
		t.Errorf("%s: %d of %d datagrams differ", name, mismatches, len(c.Packets))
	}
	t.Logf("%s: %d datagrams; handshakes %d/%d; versions %v; key phases %v; frame lists agree on every datagram: %v",
		name, len(c.Packets), done, attempts, versions, kp, mismatches == 0)
}

// TestTsharkAgreement runs a real transfer between two real peers through
// the relay, with a key update, and checks that the analyzer and Debian's
// tshark read the same captures the same way.
func TestTsharkAgreement(t *testing.T) {
	tshark, err := exec.LookPath("tshark")
	if err != nil {
		t.Skip("tshark is not installed (apt-get install tshark)")
	}
	pairs := [][3]string{{"quic-go", "quic-go", "keyupdate"}, {"quiver", "quiver", "keyupdate"}}
	// The Retry pair disagrees with tshark 4.0 for a reason outside the
	// analyzer: x/net answers each of the quic-go client's first Initials
	// with its own Retry (four in a row), the client follows the first as
	// RFC 9000 §17.2.5.2 requires, and tshark ("Cannot verify Retry Packet
	// due to unknown ODCID") then fails to decrypt some or all of the
	// server's packets while still counting their key phase bits. The
	// relay's captures are now in time order (netem
	// TestRelayTraceTimeOrder), which removed the other suspect; the pair
	// runs on request.
	if os.Getenv("QUIVER_TSHARK_ALL") == "1" {
		pairs = append(pairs, [3]string{"go-x-net", "quic-go", "retry"})
	}
	for _, pair := range pairs {
		t.Run(strings.Join(pair[:], "-"), func(t *testing.T) {
			server, client := impl(t, pair[0]), impl(t, pair[1])
			r := &Runner{Dir: t.TempDir(), Seed: 7}
			res := r.RunCell(context.Background(), server, client, testCase(t, pair[2]))
			if res.Result != Succeeded {
				t.Fatalf("%s: %s %s: %s", pair, res.Result, res.Reason, res.Detail)
			}
			srv, relay := res.Scenario.Server, res.Scenario.Relay
			compareWithTshark(t, tshark, filepath.Join(r.Dir, res.Paths.ServerTrace), srv)
			compareWithTshark(t, tshark, filepath.Join(r.Dir, res.Paths.ClientTrace), relay)
		})
	}
}
