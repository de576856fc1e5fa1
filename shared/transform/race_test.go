//go:build race

package transform

// raceEnabled reports a build with the race detector.
const raceEnabled = true
