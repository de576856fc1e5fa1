package main

import (
	"regexp"
	"strings"
)

// The statements of the SQL Server migrations that declare a column's type.
var (
	// createTable finds CREATE TABLE name ( ... ); the body ends at a line that closes it.
	createTable = regexp.MustCompile(`(?s)CREATE TABLE (\w+) \((.*?)\n\s*\);`)
	// columnLine finds one column of a CREATE TABLE body: name and type.
	columnLine = regexp.MustCompile(`^\s*\[?(\w+)\]?\s+([A-Z][A-Z0-9]*(?:\([^)]*\))?)`)
	// addColumn finds ALTER TABLE name ADD column type.
	addColumn = regexp.MustCompile(`ALTER TABLE (\w+) ADD \[?(\w+)\]? ([A-Z][A-Z0-9]*(?:\([^)]*\))?)`)
	// createIndex finds CREATE [UNIQUE] INDEX name ON table (columns) [WHERE ...];
	createIndex = regexp.MustCompile(`(?s)CREATE (UNIQUE )?INDEX (\w+) ON (\w+) (\(.*?);`)
	// alterColumn finds ALTER TABLE name ALTER COLUMN column type.
	alterColumn = regexp.MustCompile(`ALTER TABLE (\w+) ALTER COLUMN \[?(\w+)\]? ([A-Z][A-Z0-9]*(?:\([^)]*\))?)`)
)

// notColumns are the first words of a CREATE TABLE line that declares no column.
var notColumns = map[string]bool{"CONSTRAINT": true, "PRIMARY": true, "UNIQUE": true, "INDEX": true, "CHECK": true, "FOREIGN": true}

// sqlServerSchema is what the SQL Server migrations declare.
type sqlServerSchema struct {
	// types holds the type of each column, by table and column (outbox.topic).
	types map[string]string
	// indexes holds the definition of each index, by table and index name
	// (outbox idx_outbox_topic): "(topic)", "UNIQUE (a, b) WHERE ...".
	indexes map[string]map[string]string
}

// parseSQLServer adds the column types and indexes that the SQL Server migration sql declares
// to s; a later statement wins.
func (s sqlServerSchema) parse(sql string) {
	types := s.types
	for _, m := range createIndex.FindAllStringSubmatch(sql, -1) {
		if s.indexes[m[3]] == nil {
			s.indexes[m[3]] = map[string]string{}
		}
		s.indexes[m[3]][m[2]] = strings.Join(strings.Fields(m[1]+m[4]), " ")
	}
	for _, m := range createTable.FindAllStringSubmatch(sql, -1) {
		for _, line := range strings.Split(m[2], "\n") {
			c := columnLine.FindStringSubmatch(line)
			if c == nil || notColumns[strings.ToUpper(c[1])] {
				continue
			}
			types[m[1]+"."+c[1]] = c[2]
		}
	}
	for _, re := range []*regexp.Regexp{addColumn, alterColumn} {
		for _, m := range re.FindAllStringSubmatch(sql, -1) {
			if strings.EqualFold(m[2], "CONSTRAINT") {
				continue
			}
			types[m[1]+"."+m[2]] = m[3]
		}
	}
}
