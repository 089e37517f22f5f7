package streams

import (
	"bytes"
	"testing"
)

func TestChunkBufWriteReadDiscard(t *testing.T) {
	var b chunkBuf
	data := make([]byte, 3*chunkSize+100)
	for i := range data {
		data[i] = byte(i * 7)
	}
	b.writeAt(0, data)
	if got := b.held(); got != 4*chunkSize {
		t.Fatalf("held %d, want %d", got, 4*chunkSize)
	}
	got := make([]byte, 200)
	b.readAt(chunkSize-100, got) // straddles a chunk boundary
	if !bytes.Equal(got, data[chunkSize-100:chunkSize+100]) {
		t.Fatal("readAt across chunks returned wrong bytes")
	}
	if v := b.view(chunkSize-100, 200); len(v) != 100 {
		t.Fatalf("view across a boundary has %d bytes, want 100", len(v))
	}
	b.discardTo(2*chunkSize + 5)
	if b.base != 2*chunkSize || b.held() != 2*chunkSize {
		t.Fatalf("after discard base=%d held=%d", b.base, b.held())
	}
	b.readAt(2*chunkSize+5, got)
	if !bytes.Equal(got, data[2*chunkSize+5:2*chunkSize+205]) {
		t.Fatal("readAt after discard returned wrong bytes")
	}
	b.discardTo(uint64(len(data)) + 5*chunkSize)
	if b.held() != 0 || b.base != uint64(len(data))+5*chunkSize-uint64(len(data)+5*chunkSize)%chunkSize {
		t.Fatalf("after full discard base=%d held=%d", b.base, b.held())
	}
}

func TestChunkBufSparse(t *testing.T) {
	var b chunkBuf
	b.writeAt(5*chunkSize+10, []byte("late"))
	if b.held() != chunkSize {
		t.Fatalf("sparse write holds %d bytes, want one chunk", b.held())
	}
	b.writeAt(3, []byte("early"))
	p := make([]byte, 4)
	b.readAt(5*chunkSize+10, p)
	if string(p) != "late" {
		t.Fatalf("got %q", p)
	}
	b.release(0)
	if b.held() != 0 || len(b.chunks) != 0 {
		t.Fatal("release kept chunks")
	}
}
