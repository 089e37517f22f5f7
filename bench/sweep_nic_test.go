package bench

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// TestNICSweepConfigs checks the mtu and offload sweep points: on the veth
// pair, named by value, bad values refused.
func TestNICSweepConfigs(t *testing.T) {
	cs, err := SweepConfigs("mtu", []string{"1500", "9000"}, "loopback")
	if err != nil {
		t.Fatal(err)
	}
	if cs[1].Name != "veth-mtu9000" || cs[1].MTU != 9000 || cs[1].Topology != "veth" {
		t.Errorf("mtu 9000: %+v", cs[1])
	}
	cs, err = SweepConfigs("offload", OffloadNames, "loopback")
	if err != nil || len(cs) != len(OffloadNames) || cs[2].Offload != "none" || cs[2].Topology != "veth" {
		t.Fatalf("offload configs %+v, %v", cs, err)
	}
	for _, bad := range [][2]string{{"mtu", "1000"}, {"mtu", "jumbo"}, {"offload", "tso"}} {
		if _, err := SweepConfigs(bad[0], []string{bad[1]}, "loopback"); err == nil {
			t.Errorf("%s=%s accepted", bad[0], bad[1])
		}
	}
}

// TestNICApply sets MTU and offloads on the bench's veth pair and reads
// them back from the kernel (root and ethtool only).
func TestNICApply(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the veth pair needs root")
	}
	if _, err := exec.LookPath("ethtool"); err != nil {
		t.Skip("no ethtool")
	}
	e := &environment{rate: -1}
	if err := e.setupNetns(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer e.restore()
	read := func(args ...string) string {
		out, err := exec.Command("ip", append([]string{"netns", "exec", nsClient}, args...)...).CombinedOutput()
		if err != nil {
			t.Fatalf("%v: %v\n%s", args, err, out)
		}
		return string(out)
	}
	for _, x := range []struct {
		mtu     int
		offload string
		want    []string
	}{
		{9000, "none", []string{"mtu 9000", "generic-segmentation-offload: off", "tcp-segmentation-offload: off"}},
		{1500, "all", []string{"mtu 1500", "generic-receive-offload: on", "generic-segmentation-offload: on"}},
		{0, "", []string{"mtu 1500", "generic-receive-offload: off", "generic-segmentation-offload: on"}},
	} {
		if err := e.apply(Config{Topology: "veth", MTU: x.mtu, Offload: x.offload}); err != nil {
			t.Fatal(err)
		}
		got := read("ip", "link", "show", vethCli) + read("ethtool", "-k", vethCli)
		for _, w := range x.want {
			if !strings.Contains(got, w) {
				t.Errorf("mtu %d offload %q: %q not in\n%s", x.mtu, x.offload, w, got)
			}
		}
	}
}
