package rpccode_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// TestCodesAreDefinedOnce: no package but this one gives a JSON-RPC error
// code (-32768 to -32000) a value of its own in a constant. Others name the
// code from here (or from go-sdk, for go-sdk's), so that one code cannot
// mean two things in two packages again (switchboard client's -32002 for
// outcome unknown against the pool's -32060; -32000 in four places).
func TestCodesAreDefinedOnce(t *testing.T) {
	root := filepath.Join("..", "..")
	own, _ := filepath.Abs(".")
	fset := token.NewFileSet()
	var found []string
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			switch d.Name() {
			case "testdata", "node_modules", ".git":
				return filepath.SkipDir
			}
			if abs, _ := filepath.Abs(path); abs == own {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, 0)
		if err != nil {
			return err
		}
		ast.Inspect(f, func(n ast.Node) bool {
			gd, ok := n.(*ast.GenDecl)
			if !ok || gd.Tok != token.CONST {
				return true
			}
			for _, spec := range gd.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, v := range vs.Values {
					if code, ok := literalCode(v); ok {
						found = append(found, fset.Position(vs.Pos()).String()+": "+vs.Names[i].Name+" = "+strconv.Itoa(code))
					}
				}
			}
			return false
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(found) > 0 {
		t.Fatalf("JSON-RPC error codes defined outside internal/rpccode; name them from there:\n%s", strings.Join(found, "\n"))
	}
}

// literalCode reports whether e is a literal -N in JSON-RPC's reserved
// range.
func literalCode(e ast.Expr) (int, bool) {
	u, ok := e.(*ast.UnaryExpr)
	if !ok || u.Op != token.SUB {
		return 0, false
	}
	lit, ok := u.X.(*ast.BasicLit)
	if !ok || lit.Kind != token.INT {
		return 0, false
	}
	n, err := strconv.Atoi(lit.Value)
	if err != nil || n < 32000 || n > 32768 {
		return 0, false
	}
	return -n, true
}
