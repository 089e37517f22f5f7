package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// DefaultRmem is the study's (and Linux's usual) default receive buffer,
// net.core.rmem_default = 212,992 bytes; the receive-buffer sweep scales it.
const DefaultRmem = 212992

// SweepParams lists the parameters Sweep can vary, with their default values.
var SweepParams = map[string]string{
	"rcvbuf":   "0.5,1,2,4,8,16,32",
	"gso":      "on,off",
	"gro":      "on,off",
	"cipher":   "aes128,aes256,chacha20,aes128-noaesni",
	"cc":       "cubic,reno,bbr",
	"ack":      "2,4,10,adaptive",
	"rate":     "1,5,10",
	"topology": "loopback,veth",
	"mtu":      "1500,9000",
	"offload":  "default,all,none,no-tso,no-gso,no-csum",
	"pin":      "none,same,different",
}

// SweepParamNames lists the parameters in the order help shows them.
var SweepParamNames = []string{"rcvbuf", "gso", "gro", "cipher", "cc", "ack", "rate", "topology", "mtu", "offload", "pin"}

// SweepConfigs turns a parameter and its values into configurations, all
// on topology ("loopback" or "veth") unless the parameter is the topology
// or the link rate (Gbit/s, which needs the veth pair).
func SweepConfigs(param string, values []string, topology string) ([]Config, error) {
	if topology == "" {
		topology = "loopback"
	}
	if topology != "loopback" && topology != "veth" {
		return nil, fmt.Errorf("topology %q: want loopback or veth", topology)
	}
	if _, ok := SweepParams[param]; !ok {
		return nil, fmt.Errorf("sweep parameter %q: want one of %s", param, strings.Join(SweepParamNames, ", "))
	}
	var out []Config
	for _, v := range values {
		v = strings.TrimSpace(v)
		c := Config{Name: param + "=" + v, Topology: topology}
		switch param {
		case "rcvbuf":
			f, err := strconv.ParseFloat(strings.TrimSuffix(v, "x"), 64)
			if err != nil || f <= 0 {
				return nil, fmt.Errorf("receive buffer factor %q: want a positive number such as 0.5 or 32", v)
			}
			c.Name = fmt.Sprintf("rcvbuf=%gx", f)
			c.Rmem = int(f * DefaultRmem)
			// The study swept the default buffer of stacks that keep it;
			// Quiver forces 8 MiB unless told to keep the kernel's.
			c.Knobs.KernelBuffers = true
		case "gso":
			if v != "on" && v != "off" {
				return nil, fmt.Errorf("gso %q: want on or off", v)
			}
			c.Knobs.GSO = v
		case "gro":
			if v != "on" && v != "off" {
				return nil, fmt.Errorf("gro %q: want on or off", v)
			}
			c.Knobs.GRO = v
		case "cipher":
			if v != "aes128" && v != "aes256" && v != "chacha20" && v != "aes128-noaesni" {
				return nil, fmt.Errorf("cipher %q: want aes128, aes256, chacha20 or aes128-noaesni", v)
			}
			c.Knobs.Cipher = v
		case "ack":
			r := -1
			if v = strings.TrimPrefix(v, "1:"); v != "adaptive" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 1 {
					return nil, fmt.Errorf("ACK ratio %q: want packets per ACK (2 is RFC 9000's default) or adaptive", v)
				}
				r = n
			}
			c.Name, c.Knobs.AckRatio = "ack="+ratioName(r), r
		case "cc":
			if v != "cubic" && v != "reno" && v != "bbr" {
				return nil, fmt.Errorf("congestion controller %q: want cubic, reno or bbr", v)
			}
			c.Knobs.CC = v
		case "rate":
			g, err := strconv.ParseFloat(strings.TrimSuffix(v, "gbit"), 64)
			if err != nil || g < 0 {
				return nil, fmt.Errorf("rate %q: want Gbit/s such as 1, 5 or 10 (0: unshaped veth)", v)
			}
			c.Name = fmt.Sprintf("veth-%ggbit", g)
			if g == 0 {
				c.Name = "veth-unshaped"
			}
			c.Topology, c.Rate = "veth", int64(g*1e9)
		case "topology":
			if v != "loopback" && v != "veth" {
				return nil, fmt.Errorf("topology %q: want loopback or veth", v)
			}
			c.Name, c.Topology = v, v
		case "mtu", "offload":
			if err := nicConfig(&c, param, v); err != nil {
				return nil, err
			}
		case "pin":
			if err := pinConfig(&c, v); err != nil {
				return nil, err
			}
		}
		if c.Topology == "veth" && param != "rate" && param != "topology" && param != "mtu" && param != "offload" {
			c.Name += "/veth"
		}
		out = append(out, c)
	}
	return out, nil
}

// Sweep measures goodput for every pair across the configurations in
// o.Configs, alternating between them run by run.
func Sweep(ctx context.Context, o Options) (*Result, error) {
	if len(o.Configs) == 0 {
		return nil, fmt.Errorf("a sweep needs configurations")
	}
	if o.Size <= 0 {
		return nil, fmt.Errorf("file size must be positive")
	}
	return measure(ctx, &o, "sweep")
}
