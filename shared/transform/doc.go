// Package transform describes the JSONata transforms of QueueBox: at the source stage (before
// the inbox stores a message), the route stage and the destination stage (before a delivery).
// It holds what every part that runs a transform shares, without a JavaScript engine: the
// transform block ([Config], [Limits], [OnError]), the variables of each stage ([Vars],
// [DeliveryVars], [SourceVars]), the errors ([Error], [IsFailure]) and the error strategies
// of each stage ([Decide], [CompileStep], [Step], [RunSource], [RunDelivery]).
//
// A compiled expression is an [Expression] made by a [Compiler]: the JSONata engine of
// shared/transform/jsonata, which a program passes to the parts that run transforms, so that
// a program that runs none links no JavaScript engine. docs/transforms.md describes the
// engine for operators.
package transform
