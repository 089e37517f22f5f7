// Package netem emulates network links in user space: rate, queue, delay,
// jitter, loss (random, bursty, capped runs, drop lists, blackholes),
// corruption, reordering, duplication and NAT rebinding.
//
// The project's kernels have no netem qdisc, so every impairment that is
// not plain rate shaping has to be done here. The package has three layers:
//
//   - [Impairer] is the link model itself: a pure state struct that, given
//     a datagram arriving at a time, decides whether it is dropped, when its
//     copies are delivered and whether it is corrupted. It reads no clock and
//     draws from a seeded generator, so a run can be replayed.
//   - [Network] is an in-process datagram network of [Conn] endpoints
//     (each a [net.PacketConn]) joined by Impairers, driven by time.AfterFunc
//     so that it runs under testing/synctest with a fake clock.
//   - [Relay] is a real UDP relay between processes, applying the same model
//     with real timers, for interop runs against other implementations. It
//     moves datagrams in batches (recvmmsg/sendmmsg), writes those the link
//     lets through at once without a timer, and carries each datagram's IP
//     ECN field across (IP_RECVTOS/IPV6_RECVTCLASS in, IP_TOS/IPV6_TCLASS
//     control messages out).
//
// Both Network and Relay report every datagram (sent, delivered, dropped)
// to an optional [CaptureFunc]. [NewPcapTrace] writes one side of the link
// as pcapng (ClientTrace and ServerTrace pick the events, as in the interop
// runner's two traces); [NewTraceWriter] does the same through any
// [DatagramWriter].
//
// Wiring the engine to an in-process Network, inside a synctest bubble:
//
//	n, _ := netem.NewNetwork(netem.NetworkConfig{Seed: 1, Link: netem.Link{Rate: 10e6, Delay: 15 * time.Millisecond, QueuePackets: 25}})
//	defer n.Close()
//	sconn, _ := n.Listen(netip.MustParseAddrPort("10.0.0.1:443"))
//	cconn, _ := n.Listen(netip.MustParseAddrPort("10.0.0.2:0"))
//	sep, _ := quic.NewEndpoint(sconn, serverConfig)
//	cep, _ := quic.NewEndpoint(cconn, nil)
//	conn, err := cep.Dial(ctx, "udp", "10.0.0.1:443", clientConfig)
//
// and to another process through a Relay:
//
//	r, _ := netem.NewRelay(netem.RelayConfig{Server: serverAddr, ToServer: l, ToClient: l, Seed: seed})
//	r.Start(ctx)
//	defer r.Stop()
//	conn, err := quic.Dial(ctx, "udp", r.Addr().String(), clientConfig)
//
// Two more pieces use the same model. [StreamRelay] is its TCP
// counterpart, for comparing TCP+TLS with QUIC over the same emulated
// path (a user-space relay cannot drop bytes, so it models loss by the
// delay a retransmission costs). [SetupNamespaces] builds a client, a
// router and a server network namespace joined by veth pairs (root and
// iproute2 needed; [NamespacesAvailable] says why not): a Relay listening
// in the router ([Namespaces.ListenUDP]) then carries real addresses and
// kernel queues, and tc's tbf shapes fast links; the interop runner's "ns"
// engine and the benchmarks' rate sweep run there.
//
// Where to start: [Link] describes one direction of a path; [NewNetwork]
// for tests in one process, [NewRelay] between processes.
package netem
