package h3

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"
	"testing/synctest"
)

func randomBytes(n int, seed uint64) []byte {
	b := make([]byte, n)
	r := rand.New(rand.NewPCG(seed, seed))
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

func TestHQGet(t *testing.T) {
	files := fstest.MapFS{
		"1k":         {Data: randomBytes(1024, 1)},
		"10m":        {Data: randomBytes(10<<20, 2)},
		"empty":      {Data: nil},
		"dir/nested": {Data: []byte("nested")},
	}
	synctest.Test(t, func(t *testing.T) {
		client, server := newMemPair(ALPNHQInterop)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- ServeHQ(ctx, server, files) }()

		for _, name := range []string{"1k", "10m", "empty", "dir/nested"} {
			var buf bytes.Buffer
			n, err := GetHQ(ctx, client, "/"+name, &buf)
			if err != nil {
				t.Fatalf("GET /%s: %v", name, err)
			}
			if n != int64(len(files[name].Data)) || !bytes.Equal(buf.Bytes(), files[name].Data) {
				t.Fatalf("GET /%s: got %d bytes, not byte-exact with %d", name, n, len(files[name].Data))
			}
		}
		// A missing file, and a directory, are resets with HQCodeNotFound.
		for _, name := range []string{"/missing", "/dir", "/"} {
			_, err := GetHQ(ctx, client, name, io.Discard)
			if e, ok := asH3Error(err); !ok || !e.Remote || uint64(e.Code) != HQCodeNotFound {
				t.Errorf("GET %s: %v, want a reset with HQCodeNotFound", name, err)
			}
		}
		cancel()
		if err := <-done; err != context.Canceled {
			t.Errorf("ServeHQ = %v, want context.Canceled", err)
		}
	})
}

// TestHQConcurrent runs several transfers at once on one connection.
func TestHQConcurrent(t *testing.T) {
	files := fstest.MapFS{}
	for i := range 8 {
		files[string(rune('a'+i))] = &fstest.MapFile{Data: randomBytes(100_000*(i+1), uint64(i))}
	}
	synctest.Test(t, func(t *testing.T) {
		client, server := newMemPair(ALPNHQInterop)
		go ServeHQ(t.Context(), server, files)
		errs := make(chan error, len(files))
		for name, f := range files {
			go func() {
				var buf bytes.Buffer
				_, err := GetHQ(t.Context(), client, "/"+name, &buf)
				if err == nil && !bytes.Equal(buf.Bytes(), f.Data) {
					err = io.ErrShortWrite
				}
				errs <- err
			}()
		}
		for range files {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
		client.Close(0, "")
	})
}

func TestHQRequestLines(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		client, server := newMemPair(ALPNHQInterop)
		go ServeHQ(t.Context(), server, fstest.MapFS{"f": {Data: []byte("F")}})
		for _, tc := range []struct {
			req  string
			want string // body, or "" for a reset
			code uint64
		}{
			{"GET /f\r\n", "F", 0},
			{"GET /f\n", "F", 0},           // missing CR
			{"GET /f", "F", 0},             // FIN ends the line
			{"GET /../f\r\n", "F", 0},      // cannot climb above the root
			{"GET /x/../../f\r\n", "F", 0}, // nor through a directory
			{"GET f\r\n", "", HQCodeBadRequest},
			{"POST /f\r\n", "", HQCodeBadRequest},
			{"GET /f g\r\n", "", HQCodeBadRequest},
			{"GET /" + string(bytes.Repeat([]byte("a"), MaxHQRequest)), "", HQCodeBadRequest},
		} {
			st, _ := client.OpenStream(t.Context())
			st.Write([]byte(tc.req))
			st.CloseWrite()
			body, err := io.ReadAll(st)
			if tc.code != 0 {
				if re, ok := err.(*memResetError); !ok || re.code != tc.code {
					t.Errorf("%q: body %q, err %v; want reset %#x", tc.req, body, err, tc.code)
				}
				continue
			}
			if err != nil || string(body) != tc.want {
				t.Errorf("%q: body %q, err %v; want %q", tc.req, body, err, tc.want)
			}
		}
		client.Close(0, "")
	})
}

// TestHQNoEscape checks that a real directory cannot be left with "..".
func TestHQNoEscape(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "secret"), []byte("secret"), 0o600)
	os.Mkdir(filepath.Join(dir, "www"), 0o700)
	os.WriteFile(filepath.Join(dir, "www", "ok"), []byte("ok"), 0o600)
	root, err := os.OpenRoot(filepath.Join(dir, "www"))
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	synctest.Test(t, func(t *testing.T) {
		client, server := newMemPair(ALPNHQInterop)
		go ServeHQ(t.Context(), server, root.FS())
		var buf bytes.Buffer
		if _, err := GetHQ(t.Context(), client, "/ok", &buf); err != nil || buf.String() != "ok" {
			t.Fatalf("GET /ok: %q, %v", buf.String(), err)
		}
		for _, p := range []string{"/../secret", "/..%2fsecret", "/./../secret"} {
			buf.Reset()
			if _, err := GetHQ(t.Context(), client, p, &buf); err == nil || buf.Len() > 0 {
				t.Errorf("GET %s escaped the root: %q", p, buf.String())
			}
		}
		client.Close(0, "")
	})
}
