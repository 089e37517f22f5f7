// Package rawquic holds the leaf pieces of the conformance suite's scripted
// raw client, the endpoint that sends anything byte for byte: the sets of
// packet numbers it acknowledges (PNSet), the reassembly of the server's
// streams with a bounded memory and a digest of what went past (Stream,
// Digest), the flow-control credit it grants as it reads (Credit), its UDP
// sockets with each datagram's ECN codepoint, kernel time and IPv6 flow
// label (Path, In), and the TLS ClientHello and ServerHello it parses and
// rewrites (ClientHello, ServerHello). None of them knows the recorder or
// a scenario; the raw client itself is package conformance's rawClient.
package rawquic
