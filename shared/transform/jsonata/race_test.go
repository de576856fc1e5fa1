//go:build race

package jsonata

// raceEnabled reports a build with the race detector.
const raceEnabled = true
