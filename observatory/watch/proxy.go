package watch

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"unicode"

	"github.com/quiver-quic/quiver/observatory/results"
)

// DefaultProxy is the Go module proxy asked when GOPROXY names none.
const DefaultProxy = "https://proxy.golang.org"

// ProxyFromEnv picks the first proxy URL of a GOPROXY value ("direct" and
// "off" are no proxies; the default is DefaultProxy).
func ProxyFromEnv(goproxy string) string {
	for _, p := range strings.FieldsFunc(goproxy, func(r rune) bool { return r == ',' || r == '|' }) {
		if p = strings.TrimSpace(p); p != "direct" && p != "off" && p != "" {
			return strings.TrimSuffix(p, "/")
		}
	}
	return DefaultProxy
}

// escapePath escapes a module path for a proxy URL: the GOPROXY protocol
// writes each upper-case letter as '!' followed by its lower case, so that
// case-insensitive file systems can serve it.
func escapePath(module string) (string, error) {
	if module == "" || strings.Contains(module, "..") || strings.HasPrefix(module, "/") {
		return "", fmt.Errorf("bad module path %q", module)
	}
	var b strings.Builder
	for _, r := range module {
		switch {
		case r == '!' || r > unicode.MaxASCII || unicode.IsSpace(r) || r < 0x20:
			return "", fmt.Errorf("bad module path %q", module)
		case unicode.IsUpper(r):
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
		default:
			b.WriteRune(r)
		}
	}
	return b.String(), nil
}

// maxList bounds the @v/list answer read (a few thousand versions).
const maxList = 1 << 20

// ListVersions asks a module proxy for a module's released versions
// (GET $GOPROXY/<module>/@v/list: "a list of known versions of the given
// module, one per line"), and returns them oldest first. Lines that are no
// release version (pre-releases, pseudo-versions, junk) are left out.
func ListVersions(ctx context.Context, client *http.Client, proxy, module string) ([]string, error) {
	esc, err := escapePath(module)
	if err != nil {
		return nil, err
	}
	if client == nil {
		client = http.DefaultClient
	}
	u := strings.TrimSuffix(proxy, "/") + "/" + esc + "/@v/list"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", module, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("list versions of %s: %s answered %s", module, proxy, resp.Status)
	}
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxList+1))
	if err != nil {
		return nil, fmt.Errorf("list versions of %s: %w", module, err)
	}
	if len(body) > maxList {
		return nil, fmt.Errorf("list versions of %s: the answer is over %d bytes", module, maxList)
	}
	return ParseList(body), nil
}

// ParseList reads an @v/list answer: release versions, oldest first,
// each once.
func ParseList(body []byte) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(body))
	for sc.Scan() {
		v := strings.TrimSpace(sc.Text())
		if results.IsVersion(v) && !strings.ContainsAny(v, "-+") && !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.SortFunc(out, results.CompareVersions)
	return out
}
