package tutorials_test

import "testing"

// TestRebuildGo checks the rebuilding of a Go file whose line breaks a page lost: the result
// parses, has gofmt's layout, and keeps the struct tags' back quotes.
func TestRebuildGo(t *testing.T) {
	flat := "package main import ( \"fmt\" \"os\" ) type order struct { ID string `json:\"id\"` Total int `json:\"total\"` } func main() { o := order{ID: \"a\"} if len(os.Args) > 5 { return } fmt.Println(o.ID) }"
	want := "package main\n\nimport (\n\t\"fmt\"\n\t\"os\"\n)\n\ntype order struct {\n\tID    string `json:\"id\"`\n\tTotal int    `json:\"total\"`\n}\n\nfunc main() {\n\to := order{ID: \"a\"}\n\tif len(os.Args) > 5 {\n\t\treturn\n\t}\n\tfmt.Println(o.ID)\n}\n"
	got, err := rebuildGo(flat)
	if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Errorf("rebuildGo gave\n%s\nwant\n%s", got, want)
	}
	if _, err := rebuildGo("package main func main() { x := }"); err == nil {
		t.Error("rebuildGo accepted a file that no line break makes valid")
	}
}
