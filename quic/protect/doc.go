// Package protect implements QUIC packet protection as specified in RFC 9001
// (QUIC v1) and RFC 9369 (QUIC v2): Initial secrets, key derivation from the
// traffic secrets that crypto/tls hands out, AEAD payload protection, header
// protection, key update and the Retry integrity tag.
//
// The package knows nothing about packet parsing: callers pass the packet
// number offset, the header form and the full packet number. Versions are
// plain uint32 values (Version1, Version2).
//
// Steady-state operations (Keys.Seal, Keys.Open, HeaderProtector.Apply and
// HeaderProtector.Remove) do not allocate when the destination buffer has
// room. A Keys or HeaderProtector value keeps scratch buffers for that
// purpose, so it must not be used by several goroutines at once; in the
// engine each connection's loop owns its keys.
package protect
