// Package qlog records QUIC connection events as qlog 0.3 traces in the
// JSON-SEQ serialisation (RFC 7464 record separators), the form the qvis
// visualiser loads.
//
// The engine builds typed events (PacketSent, MetricsUpdated, ...) and hands
// them to a Recorder. Tests use a MemoryRecorder and assert on the recorded
// values, which makes qlog a test oracle; a Writer encodes the same events to
// a file. Because building an event is not free, callers should check
// Recorder.Enabled before constructing one on a hot path.
//
// The event names and field names follow the 0.3-era drafts
// (draft-ietf-quic-qlog-main-schema-04 and draft-ietf-quic-qlog-quic-events-03)
// rather than the latest drafts, because qvis treats "0.3" as an alias of its
// draft-02 schema. In that schema key updates live in the "security" category,
// so KeyUpdated is named "security:key_updated", not "transport:key_updated".
//
// A Reader parses JSON-SEQ files back, validates the header and the events,
// and gives generic access to every event plus typed decoding of the events
// this package defines.
//
// Where to start: quic.Config.Tracer returns a [Recorder] per connection:
// a [Writer] from [NewFileWriter] (as `quiver serve --qlog DIR` does), or a
// [MemoryRecorder] in tests; [ReadFile] reads a trace back.
package qlog
