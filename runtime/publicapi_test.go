package runtime_test

// The public packages are what a Go program embedding Switchboard imports,
// and such a program cannot import anything under internal/: a type from
// there in an exported signature is one it can receive but never name,
// declare or construct. This test type-checks the public packages from the
// compiler's export data (what `go list -export` writes, the data go/packages
// reads) and walks everything a caller can reach from an exported name:
// functions, methods (promoted ones too), exported fields, variables and
// constants, type parameters and aliases.

import (
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/doc"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/switchboard-run/switchboard"

// publicPackages are the packages documented for embedding (README.md,
// "Embedding Switchboard in a Go program").
var publicPackages = []string{
	module + "/runtime",
	module + "/runtime/agentdef",
	module + "/runtime/builtin",
	module + "/delegation",
	module + "/pool",
	module + "/pool/mcpconfig",
}

func TestPublicAPIMentionsNoInternalPackage(t *testing.T) {
	pkgs := exportData(t, publicPackages)
	for _, path := range publicPackages {
		var found []string
		walkExported(pkgs[path], func(where string, named string) {
			found = append(found, fmt.Sprintf("%s mentions %s", where, named))
		})
		slices.Sort(found)
		for _, f := range slices.Compact(found) {
			t.Errorf("%s: %s, which a program outside this module cannot import", path, f)
		}
	}
}

// TestPublicAPICheckFindsInternalTypes proves the walk sees a type from an
// internal package wherever the API could expose one: without it, a walk
// that found nothing would pass the test above.
func TestPublicAPICheckFindsInternalTypes(t *testing.T) {
	const src = `package probe

import "example.com/m/internal/secret"

type T struct {
	Exported   secret.Key
	unexported secret.Key
	embedded
}

type embedded struct{}

func (embedded) Promoted() *secret.Key { return nil }

type Alias = secret.Key

type G[P interface{ ~[]secret.Key }] struct{}

var V = map[string]func(chan<- [2]secret.Key){}

func F(...secret.Key) (ok bool) { return }

func (T) M() interface{ N() secret.Key } { return nil }

func (T) unexportedMethod() secret.Key { return secret.Key{} }

func unexportedFunc(secret.Key) {}
`
	secret := types.NewPackage("example.com/m/internal/secret", "secret")
	key := types.NewTypeName(token.NoPos, secret, "Key", nil)
	types.NewNamed(key, types.NewStruct(nil, nil), nil)
	secret.Scope().Insert(key)
	secret.MarkComplete()
	pkg := typeCheck(t, src, secret)

	var got []string
	walkExported(pkg, func(where, named string) { got = append(got, where) })
	slices.Sort(got)
	got = slices.Compact(got)
	want := []string{"Alias", "F", "G", "T.Exported", "T.M", "T.Promoted", "V"}
	if !slices.Equal(got, want) {
		t.Errorf("found internal types in %q, want %q", got, want)
	}
}

// walkExported calls report for every internal-package type reachable from
// an exported declaration of pkg, with where it was reached.
func walkExported(pkg *types.Package, report func(where, named string)) {
	w := &apiWalker{home: pkg, seen: map[types.Type]bool{}, report: report}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		w.where = name
		switch obj := obj.(type) {
		case *types.TypeName:
			if obj.IsAlias() {
				w.typ(obj.Type())
				continue
			}
			w.members(name, obj.Type())
		default: // *types.Func, *types.Var, *types.Const
			w.typ(obj.Type())
		}
	}
}

type apiWalker struct {
	home   *types.Package
	where  string
	seen   map[types.Type]bool
	report func(where, named string)
}

// members walks what a caller reaches through the named type t: its type
// parameters, its underlying type's exported fields or methods, and every
// exported method of *t, promoted ones included.
func (w *apiWalker) members(name string, t types.Type) {
	if w.seen[t] {
		return
	}
	w.seen[t] = true
	named, ok := t.(*types.Named)
	if !ok {
		w.typ(t)
		return
	}
	for tp := range named.TypeParams().TypeParams() {
		w.where = name
		w.typ(tp.Constraint())
	}
	switch u := named.Underlying().(type) {
	case *types.Struct:
		w.fields(name, u)
	case *types.Interface:
		w.where = name
		w.typ(u)
	default:
		w.where = name
		w.typ(u)
	}
	ms := types.NewMethodSet(types.NewPointer(named))
	if types.IsInterface(named) {
		ms = types.NewMethodSet(named)
	}
	for sel := range ms.Methods() {
		if sel.Obj().Exported() {
			w.where = name + "." + sel.Obj().Name()
			w.typ(sel.Type())
		}
	}
}

func (w *apiWalker) fields(name string, s *types.Struct) {
	for f := range s.Fields() {
		if f.Exported() {
			w.where = name + "." + f.Name()
			w.typ(f.Type())
		}
	}
}

// typ walks the type t as written in a signature.
func (w *apiWalker) typ(t types.Type) {
	switch t := t.(type) {
	case *types.Alias:
		w.named(t.Obj())
		w.typ(types.Unalias(t))
	case *types.Named:
		w.named(t.Obj())
		for a := range t.TypeArgs().Types() {
			w.typ(a)
		}
		if t.Obj().Pkg() == w.home && !t.Obj().Exported() {
			// An unexported type of ours reached from an exported name
			// still shows its exported fields and methods.
			where := w.where
			w.members(where, t)
			w.where = where
		}
	case *types.Pointer:
		w.typ(t.Elem())
	case *types.Slice:
		w.typ(t.Elem())
	case *types.Array:
		w.typ(t.Elem())
	case *types.Chan:
		w.typ(t.Elem())
	case *types.Map:
		w.typ(t.Key())
		w.typ(t.Elem())
	case *types.Signature:
		w.typ(t.Params())
		w.typ(t.Results())
	case *types.Tuple:
		for v := range t.Variables() {
			w.typ(v.Type())
		}
	case *types.Struct:
		where := w.where
		w.fields(where, t)
		w.where = where
	case *types.Interface:
		for m := range t.ExplicitMethods() {
			w.typ(m.Type())
		}
		for e := range t.EmbeddedTypes() {
			w.typ(e)
		}
	case *types.Union:
		for term := range t.Terms() {
			w.typ(term.Type())
		}
	case *types.TypeParam:
		w.typ(t.Constraint())
	}
}

func (w *apiWalker) named(obj *types.TypeName) {
	if obj.Pkg() != nil && isInternal(obj.Pkg().Path()) {
		w.report(w.where, obj.Pkg().Path()+"."+obj.Name())
	}
}

func isInternal(path string) bool {
	return strings.HasPrefix(path, "internal/") || strings.Contains(path, "/internal/") || strings.HasSuffix(path, "/internal")
}

// documentedPackages are held to a doc comment on every exported
// declaration, so that go doc on them reads as a manual.
var documentedPackages = []string{
	module + "/runtime",
	module + "/runtime/agentdef",
	module + "/runtime/builtin",
	module + "/delegation",
	module + "/pool/mcpconfig",
}

func TestPublicAPIIsDocumented(t *testing.T) {
	out, err := exec.Command("go", append([]string{"list", "-json=ImportPath,Dir,GoFiles"}, documentedPackages...)...).Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath, Dir string
			GoFiles         []string
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		fset := token.NewFileSet()
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		d, err := doc.NewFromFiles(fset, files, p.ImportPath)
		if err != nil {
			t.Fatal(err)
		}
		for _, missing := range undocumented(d) {
			t.Errorf("%s: %s has no doc comment", p.ImportPath, missing)
		}
	}
}

// undocumented lists the exported declarations of d without a doc
// comment. A value in a documented group counts as documented, and so do
// Error, String and Unwrap methods, whose meaning is the interface's.
func undocumented(d *doc.Package) []string {
	if d.Doc == "" {
		return []string{"the package"}
	}
	var missing []string
	values := func(prefix string, vs []*doc.Value) {
		for _, v := range vs {
			if v.Doc != "" {
				continue
			}
			for _, spec := range v.Decl.Specs {
				vs := spec.(*ast.ValueSpec)
				if vs.Doc == nil && vs.Comment == nil && ast.IsExported(vs.Names[0].Name) {
					missing = append(missing, prefix+vs.Names[0].Name)
				}
			}
		}
	}
	funcs := func(prefix string, fs []*doc.Func) {
		for _, f := range fs {
			if f.Doc == "" && f.Name != "Error" && f.Name != "String" && f.Name != "Unwrap" {
				missing = append(missing, prefix+f.Name)
			}
		}
	}
	values("", d.Consts)
	values("", d.Vars)
	funcs("", d.Funcs)
	for _, typ := range d.Types {
		if typ.Doc == "" {
			missing = append(missing, typ.Name)
		}
		values("", typ.Consts)
		values("", typ.Vars)
		funcs("", typ.Funcs)
		funcs(typ.Name+".", typ.Methods)
	}
	return missing
}

// exportData type-checks paths from the export data the go command writes
// for them and their dependencies.
func exportData(t *testing.T, paths []string) map[string]*types.Package {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-export", "-deps", "-json=ImportPath,Export,Error"}, paths...)...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v", err)
	}
	files := map[string]string{}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p struct {
			ImportPath, Export string
			Error              *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		if p.Error != nil {
			t.Fatalf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		files[p.ImportPath] = p.Export
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := files[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %q", path)
		}
		return os.Open(f)
	})
	pkgs := map[string]*types.Package{}
	for _, path := range paths {
		pkg, err := imp.Import(path)
		if err != nil {
			t.Fatalf("import %s: %v", path, err)
		}
		pkgs[path] = pkg
	}
	return pkgs
}

// typeCheck type-checks src, whose one import is dep.
func typeCheck(t *testing.T, src string, dep *types.Package) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "probe.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importerFunc(func(path string) (*types.Package, error) {
		if path != dep.Path() {
			return nil, fmt.Errorf("unexpected import %q", path)
		}
		return dep, nil
	})}
	pkg, err := conf.Check("example.com/m/probe", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return pkg
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }
