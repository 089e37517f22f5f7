// Package wire encodes and decodes the QUIC wire image: variable-length
// integers, versions, packet headers, packet numbers, frames and transport
// parameters (RFC 9000, RFC 9369, RFC 9221, RFC 9287, RFC 9368 and
// draft-ietf-quic-ack-frequency-14).
//
// Encoders never validate: they write whatever values they are given, so
// that conformance probes can send invalid packets on purpose. Parsers are
// strict: a frame or transport parameter that breaks a rule of the RFC is
// rejected with an *Error that carries the transport error code and the
// rule it broke.
//
// Parsers return sub-slices of their input for connection IDs, tokens and
// data; they never copy. Frame parsing through a Parser does not allocate.
package wire
