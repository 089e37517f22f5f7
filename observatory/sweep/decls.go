package sweep

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
)

// pkgDecls are the top-level declarations of one package's source, read
// without type checking: enough to tell which API a release has.
type pkgDecls struct {
	types map[string]ast.Expr // type name → its definition (nil for none)
	funcs map[string]bool     // package-level functions
}

// readDecls parses the non-test Go files of dir. A missing folder gives
// empty declarations.
func readDecls(dir string) (*pkgDecls, error) {
	d := &pkgDecls{types: map[string]ast.Expr{}, funcs: map[string]bool{}}
	ents, err := os.ReadDir(dir)
	if os.IsNotExist(err) {
		return d, nil
	}
	if err != nil {
		return nil, err
	}
	fset := token.NewFileSet()
	for _, e := range ents {
		name := e.Name()
		if e.IsDir() || !strings.HasSuffix(name, ".go") || strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		for _, decl := range f.Decls {
			switch decl := decl.(type) {
			case *ast.FuncDecl:
				if decl.Recv == nil {
					d.funcs[decl.Name.Name] = true
				}
			case *ast.GenDecl:
				for _, spec := range decl.Specs {
					if ts, ok := spec.(*ast.TypeSpec); ok {
						d.types[ts.Name.Name] = ts.Type
					}
				}
			}
		}
	}
	return d, nil
}

// isStruct reports whether the package declares name as a struct type.
func (d *pkgDecls) isStruct(name string) bool {
	_, ok := d.types[name].(*ast.StructType)
	return ok
}

// hasType reports whether the package declares a type name, of any kind.
func (d *pkgDecls) hasType(name string) bool {
	_, ok := d.types[name]
	return ok
}

// hasField reports whether struct type name has a field called field.
func (d *pkgDecls) hasField(name, field string) bool {
	st, ok := d.types[name].(*ast.StructType)
	if !ok {
		return false
	}
	for _, f := range st.Fields.List {
		for _, n := range f.Names {
			if n.Name == field {
				return true
			}
		}
	}
	return false
}
