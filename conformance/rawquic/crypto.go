package rawquic

// CryptoBuffer reassembles a CRYPTO stream far enough to read TLS messages.
type CryptoBuffer struct {
	data    []byte
	pending map[uint64][]byte
}

// Add places d at offset off of the stream.
func (b *CryptoBuffer) Add(off uint64, d []byte) {
	if b.pending == nil {
		b.pending = map[uint64][]byte{}
	}
	if off+uint64(len(d)) > 1<<20 {
		return // nothing a handshake needs lies that far
	}
	b.pending[off] = append([]byte(nil), d...)
	for progress := true; progress; {
		progress = false
		for o, d := range b.pending {
			end := o + uint64(len(d))
			if o <= uint64(len(b.data)) {
				if end > uint64(len(b.data)) {
					b.data = append(b.data, d[uint64(len(b.data))-o:]...)
				}
				delete(b.pending, o)
				progress = true
			}
		}
	}
}

// Contiguous returns the stream's bytes from its start up to the first gap.
func (b *CryptoBuffer) Contiguous() []byte { return b.data }
