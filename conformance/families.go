package conformance

// families names the scenario families, by the letter a Scenario's Family
// holds.
var families = map[string]string{
	"A": "Handshake and versions",
	"B": "TLS",
	"C": "Packet and frame validity",
	"D": "Streams and flow control",
	"E": "Connection IDs, path validation and migration",
	"F": "Amplification and address validation",
	"G": "Loss recovery and ACK behaviour",
	"H": "ACK frequency",
	"I": "DATAGRAM",
	"J": "Greasing",
	"K": "HTTP/3 and QPACK",
	"L": "Close, draining, idle timeout, stateless reset",
	"M": "Client-facing",
}

// FamilyName is the name of family f ("A": "Handshake and versions"), or
// "" for a letter no family has.
func FamilyName(f string) string { return families[f] }
