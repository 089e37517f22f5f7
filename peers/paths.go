package peers

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// mainModule is the module whose root holds bin/.
const mainModule = "github.com/quiver-quic/quiver"

// BinDir is the folder holding the built peers: $QUIVER_BIN when set,
// otherwise bin/ at the root of Quiver's module, found by walking up from
// the working directory to the go.mod that declares it.
func BinDir() (string, error) {
	if d := os.Getenv("QUIVER_BIN"); d != "" {
		return filepath.Abs(d)
	}
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if moduleName(filepath.Join(dir, "go.mod")) == mainModule {
			return filepath.Join(dir, "bin"), nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("cannot find bin/: not inside the Quiver repository and $QUIVER_BIN is unset")
		}
		dir = parent
	}
}

// moduleName returns the module path a go.mod declares, or "".
func moduleName(gomod string) string {
	f, err := os.Open(gomod)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module"); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`)
		}
	}
	return ""
}

// Binary returns the path of the program that plays role ("server" or
// "client"), or an error wrapping ErrNotInstalled (with how to install it)
// or ErrUnsupported.
func (im Impl) Binary(role string) (string, error) {
	cmd := im.Client
	if role == "server" {
		cmd = im.Server
	}
	if cmd == nil {
		return "", fmt.Errorf("%s as %s: %w", im.Name, role, ErrUnsupported)
	}
	path := cmd.Path
	if !filepath.IsAbs(path) {
		dir, err := BinDir()
		if err != nil {
			return "", fmt.Errorf("%s: %w: %v", im.Name, ErrNotInstalled, err)
		}
		path = filepath.Join(dir, path)
	}
	st, err := os.Stat(path)
	if err != nil || st.IsDir() || st.Mode().Perm()&0o111 == 0 {
		return "", fmt.Errorf("%s %s: %s %w; install with: %s", im.Name, role, path, ErrNotInstalled, im.Install)
	}
	return path, nil
}
