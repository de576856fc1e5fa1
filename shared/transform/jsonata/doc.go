// Package jsonata is the JSONata engine of QueueBox's transforms (shared/transform): the
// official JavaScript implementation of JSONata (npm jsonata 2.2.2, embedded by
// shared/transform/jsjsonata) running in the pure-Go JavaScript engine goja. An [Engine] holds
// a pool of goja runtimes, each with JSONata loaded once; an [Expression] is compiled once per
// runtime and cached there. Every evaluation is bounded: the Limits of transform interrupt the
// runtime at their timeout and bound JSONata's evaluation depth, goja's call stack is capped, a
// regular expression match is cut off after [RegexMatchTimeout], and an evaluation stuck in
// native code is abandoned so that the caller always gets an answer.
//
// A program passes an Engine (a transform.Compiler) to the parts that run transforms; the
// programs that run none (the relay and retention Lambda functions) do not import this
// package and so link no JavaScript engine. docs/transforms.md describes the engine for
// operators.
package jsonata
