// Package architecture holds the tests of the module's structure: the import graph of the
// top-level folders of shared/ has no cycle (folders_test.go). It has no code of its own.
package architecture
