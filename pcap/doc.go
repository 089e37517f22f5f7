// Package pcap writes and reads packet captures of UDP datagrams in the
// pcapng format, with TLS key logs embedded in Decryption Secrets Blocks so
// that Wireshark and tshark decrypt QUIC with no extra options.
//
// The writer records each UDP datagram inside synthetic IPv4 or IPv6 and UDP
// headers with the real addresses and ports, on one interface of link type
// LINKTYPE_RAW (101), which carries both IP versions. Timestamps have
// nanosecond resolution.
//
// The reader yields the UDP datagrams and the embedded secrets of pcapng
// files (any byte order, several sections and interfaces) and of classic
// pcap files, from raw IP, Ethernet, Linux cooked and BSD loopback links.
//
// Where to start: [NewWriter] (or [NewWriterOptions]) starts a capture;
// [Writer.WriteDatagram] adds a datagram with its time and addresses,
// [Writer.WriteSecrets] embeds a key log. [ReadFile] and [ReadAll] read a
// whole capture into a [Capture]; [NewReader] reads one packet at a time.
package pcap
