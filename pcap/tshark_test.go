package pcap

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestTshark cross-checks the writer with Wireshark's dissectors: tshark
// must read every datagram with its addresses, ports and length, and find
// the IPv4 and UDP checksums good.
func TestTshark(t *testing.T) {
	tshark := wiresharkTool(t, "tshark")
	path := filepath.Join(t.TempDir(), "capture.pcapng")
	if err := os.WriteFile(path, writeCapture(t, Options{SecretsFirst: true}, []byte(keylogText), true), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(tshark, "-r", path,
		"-o", "udp.check_checksum:TRUE", "-o", "ip.check_checksum:TRUE",
		"-T", "fields", "-E", "separator=,",
		"-e", "ip.src", "-e", "ipv6.src", "-e", "udp.srcport",
		"-e", "ip.dst", "-e", "ipv6.dst", "-e", "udp.dstport",
		"-e", "udp.length", "-e", "ip.checksum.status", "-e", "udp.checksum.status",
		"-e", "frame.time_epoch")
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir()) // keep tshark's profile out of the real home
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("tshark: %v\n%s", err, stderr.Bytes())
	}
	var want []string
	for _, d := range sampleDatagrams() {
		src, dst := d.src.Addr().Unmap(), d.dst.Addr().Unmap()
		ipCheck := "" // IPv6 has no header checksum
		v4src, v6src, v4dst, v6dst := "", src.String(), "", dst.String()
		if src.Is4() {
			ipCheck = "1" // Wireshark's checksum status "Good"
			v4src, v6src, v4dst, v6dst = src.String(), "", dst.String(), ""
		}
		ts := fmt.Sprintf("%d.%09d", d.t.Unix(), d.t.Nanosecond())
		want = append(want, strings.Join([]string{v4src, v6src, fmt.Sprint(d.src.Port()), v4dst, v6dst,
			fmt.Sprint(d.dst.Port()), fmt.Sprint(8 + len(d.payload)), ipCheck, "1", ts}, ","))
	}
	got := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(got) != len(want) {
		t.Fatalf("tshark shows %d packets, want %d:\n%s", len(got), len(want), out)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("packet %d: tshark shows\n%s\nwant\n%s", i, got[i], want[i])
		}
	}
}

// wiresharkTool finds one of Wireshark's command-line tools. A missing tool
// skips the test, unless QUIVER_REQUIRE_PEERS=1 (as in CI) makes it a failure.
func wiresharkTool(t *testing.T, name string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv("QUIVER_REQUIRE_PEERS") == "1" {
			t.Fatalf("%s is not installed and QUIVER_REQUIRE_PEERS=1; install it with: apt-get install tshark", name)
		}
		t.Skipf("%s is not installed (apt-get install tshark); skipping the Wireshark cross-check", name)
	}
	return path
}

// TestEditcapSecrets checks the Decryption Secrets Block both ways with
// Wireshark's own capture library: editcap must recognise and remove the
// block the writer made, and the reader must find the secrets editcap
// injects.
func TestEditcapSecrets(t *testing.T) {
	editcap := wiresharkTool(t, "editcap")
	dir := t.TempDir()
	run := func(args ...string) {
		t.Helper()
		cmd := exec.Command(editcap, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("editcap %v: %v\n%s", args, err, out)
		}
	}
	with := filepath.Join(dir, "with.pcapng")
	without := filepath.Join(dir, "without.pcapng")
	if err := os.WriteFile(with, writeCapture(t, Options{SecretsFirst: true}, []byte(keylogText), true), 0o644); err != nil {
		t.Fatal(err)
	}
	run("--discard-all-secrets", with, without)
	c, err := ReadFile(without)
	if err != nil {
		t.Fatal(err)
	}
	if len(c.Secrets) != 0 {
		t.Errorf("editcap did not recognise the secrets block: %q remains", c.Secrets)
	}
	checkPackets(t, c.Packets, 0)

	keys := filepath.Join(dir, "keys.log")
	if err := os.WriteFile(keys, []byte(keylogText), 0o644); err != nil {
		t.Fatal(err)
	}
	injected := filepath.Join(dir, "injected.pcapng")
	run("--inject-secrets", "tls,"+keys, without, injected)
	c, err = ReadFile(injected)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.Secrets) != keylogText {
		t.Errorf("secrets injected by editcap read as %q", c.Secrets)
	}
	checkPackets(t, c.Packets, 0)
}
