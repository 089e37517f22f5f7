package bench

import (
	"fmt"
	"os/exec"
	"slices"
	"strconv"
	"strings"
)

// OffloadSets are the interface offload settings the offload sweep puts on
// both ends of the veth pair (ethtool -K), by name: the study's NIC
// offload table on the stand-in for its 10G link. "default" is what a
// fresh veth pair has (TSO, GSO, checksum offload on, GRO off).
var OffloadSets = map[string][]string{
	"default": {"tso", "on", "gso", "on", "gro", "off", "tx", "on", "rx", "on"},
	"all":     {"tso", "on", "gso", "on", "gro", "on", "tx", "on", "rx", "on"},
	"none":    {"tso", "off", "gso", "off", "gro", "off", "tx", "off", "rx", "off"},
	"no-tso":  {"tso", "off", "gso", "on", "gro", "off", "tx", "on", "rx", "on"},
	"no-gso":  {"tso", "off", "gso", "off", "gro", "off", "tx", "on", "rx", "on"},
	// Without transmit checksum offload the kernel turns TSO off too.
	"no-csum": {"tso", "off", "gso", "on", "gro", "off", "tx", "off", "rx", "off"},
}

// OffloadNames lists the offload sets in the order a sweep runs them.
var OffloadNames = []string{"default", "all", "none", "no-tso", "no-gso", "no-csum"}

// nicState is the MTU and offload set in force on the veth pair, so that
// a configuration change touches the interfaces only when needed.
type nicState struct {
	mtu     int
	offload string
	set     bool
}

// apply sets the veth pair's MTU (0: 1,500) and offloads ("": default)
// on both ends.
func (n *nicState) apply(mtu int, offload string) error {
	if mtu <= 0 {
		mtu = 1500
	}
	if offload == "" {
		offload = "default"
	}
	if n.set && n.mtu == mtu && n.offload == offload {
		return nil
	}
	flags, ok := OffloadSets[offload]
	if !ok {
		return fmt.Errorf("offload set %q: want one of %s", offload, strings.Join(OffloadNames, ", "))
	}
	for _, side := range [][2]string{{nsServer, vethSrv}, {nsClient, vethCli}} {
		if err := ipCmd("-n", side[0], "link", "set", "dev", side[1], "mtu", strconv.Itoa(mtu)); err != nil {
			return fmt.Errorf("MTU %d: %w", mtu, err)
		}
		// A fresh pair has the default set; an MTU change keeps the
		// offloads in force: neither needs ethtool.
		if n.set && n.offload == offload || !n.set && offload == "default" {
			continue
		}
		args := append([]string{"netns", "exec", side[0], "ethtool", "-K", side[1]}, flags...)
		if out, err := exec.Command("ip", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("offloads %s (needs ethtool): ip %s: %v: %s", offload, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	n.mtu, n.offload, n.set = mtu, offload, true
	return nil
}

// nicConfig fills an mtu or offload sweep point; both need the veth pair.
func nicConfig(c *Config, param, v string) error {
	c.Topology = "veth"
	switch param {
	case "mtu":
		m, err := strconv.Atoi(v)
		if err != nil || m < 1280 || m > 65535 {
			return fmt.Errorf("MTU %q: want bytes from 1280 (QUIC's minimum path) to 65535", v)
		}
		c.Name, c.MTU = "veth-mtu"+v, m
	case "offload":
		if !slices.Contains(OffloadNames, v) {
			return fmt.Errorf("offload set %q: want one of %s", v, strings.Join(OffloadNames, ", "))
		}
		c.Name, c.Offload = "veth-offload="+v, v
	}
	return nil
}
