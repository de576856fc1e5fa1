// Package transform runs the JSONata transforms of QueueBox: at the source stage (before the
// inbox stores a message), the route stage and the destination stage (before a delivery).
//
// The engine is the official JavaScript implementation of JSONata (npm jsonata 2.2.2, embedded
// from jsjsonata/jsonata.min.js) running in the pure-Go JavaScript engine goja. An [Engine]
// holds a pool of goja runtimes, each with JSONata loaded once; an [Expression] is compiled once
// per runtime and cached there. Every evaluation is bounded: [Limits.Timeout] interrupts the
// runtime, [Limits.MaxDepth] bounds JSONata's evaluation depth, goja's call stack is capped, a
// regular expression match is cut off after [RegexMatchTimeout], and an evaluation stuck in
// native code is abandoned so that the caller always gets an answer.
//
// [Decide], [Engine.CompileStep], [Step], [RunSource] and [RunDelivery] encode the error
// strategies (onError Fail, Skip, Dead) of each stage; docs/transforms.md describes the engine
// for operators.
package transform
