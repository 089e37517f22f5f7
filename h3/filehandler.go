package h3

import (
	"io/fs"
	"net/http"
)

// FileHandler serves the files of root byte for byte, the interop
// convention for HTTP/3 transfers: GET /path returns the file with its
// Content-Length, a missing file is a 404. It is http.FileServerFS, so Range
// and conditional requests work too, and a directory gets a listing.
func FileHandler(root fs.FS) http.Handler {
	return http.FileServerFS(root)
}
