//go:build !race

package inbox

// raceEnabled reports a build with the race detector.
const raceEnabled = false
