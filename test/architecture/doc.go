// Package architecture holds the tests of the module's structure, which keep
// docs/architecture.md true: the top-level folders of shared/ import each other without a
// cycle (folders_test.go), every import points down the layers of shared/ (layers_test.go),
// the map names every package and top-level folder (map_test.go), and product files and
// functions stay within their size bounds (size_test.go). It has no code of its own.
package architecture
