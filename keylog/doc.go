// Package keylog reads and writes TLS key logs in the NSS key log format
// (the SSLKEYLOGFILE format), which Wireshark and Quiver's capture analyzer
// use to decrypt QUIC.
//
// crypto/tls writes most QUIC secrets through Config.KeyLogWriter, but not
// the client's 0-RTT secret (CLIENT_EARLY_TRAFFIC_SECRET), so the engine
// writes that one itself. A Writer merges both sources into one file:
// TLSWriter gives crypto/tls a pass-through io.Writer, and Write adds the
// engine's own lines, with duplicates dropped.
//
// Where to start: [NewWriter] merges crypto/tls's lines and the engine's
// into one file; [Parse] reads a key log into [Entry] values, [Merge]
// joins several and [Format] writes them back; [ClientRandom] extracts
// the client random that keys every line from a ClientHello.
package keylog
