package transform

import (
	"context"
	"encoding/json"
)

// Stage is where a transform runs.
type Stage int

// The stages, in the order a message meets them.
const (
	// StageSource: sources.<name>.transform, once, before the inbox stores the message.
	StageSource Stage = iota + 1
	// StageRoute: routes[i].transform, on every delivery attempt.
	StageRoute
	// StageDestination: destinations.<name>.transform, on every delivery attempt, after the
	// route stage.
	StageDestination
)

// String names the stage.
func (s Stage) String() string {
	switch s {
	case StageSource:
		return "source"
	case StageRoute:
		return "route"
	case StageDestination:
		return "destination"
	default:
		return "unknown"
	}
}

// Action is what QueueBox does with a message after its transforms ran.
type Action int

// The actions of the error strategies (spec/31-transforms-and-templates.md, Error strategies).
const (
	// ActionContinue: use the body: store it (source stage) or deliver it (route and
	// destination stages). It is the action of a transform that succeeded, of no transform, and
	// of a failed transform with onError Skip, whose stage passes its input on unchanged.
	ActionContinue Action = iota + 1
	// ActionRetry: a route or destination transform failed with onError Fail. The delivery
	// fails; the row retries with backoff and counts an attempt.
	ActionRetry
	// ActionDead: a route or destination transform failed with onError Dead. The row goes to
	// dead at once.
	ActionDead
	// ActionReject: a source transform failed with onError Fail or Dead. An HTTP source answers
	// 422 and stores no row; a RabbitMQ, Kafka or NATS source stores the original payload as a
	// dead inbox row and acknowledges the message.
	ActionReject
)

// String names the action.
func (a Action) String() string {
	switch a {
	case ActionContinue:
		return "continue"
	case ActionRetry:
		return "retry"
	case ActionDead:
		return "dead"
	case ActionReject:
		return "reject"
	default:
		return "unknown"
	}
}

// Decide returns the action for a failed transform at stage with the strategy onError (an empty
// strategy is the default, Fail).
func Decide(stage Stage, onError OnError) Action {
	switch onError {
	case OnErrorSkip:
		return ActionContinue
	case OnErrorDead:
		if stage == StageSource {
			return ActionReject
		}
		return ActionDead
	default:
		if stage == StageSource {
			return ActionReject
		}
		return ActionRetry
	}
}

// Step is one compiled transform block: the expression and its error strategy.
type Step struct {
	// Expression is the compiled expression.
	Expression Expression
	// OnError is Fail, Skip or Dead.
	OnError OnError
}

// CompileStep compiles a transform block on c; a nil block gives a nil step (no transform).
// The error is the compile error of the expression, or ErrNoEngine when c is nil.
func CompileStep(c Compiler, t *Config) (*Step, error) {
	if t == nil {
		return nil, nil
	}
	if c == nil {
		return nil, ErrNoEngine
	}
	x, err := c.Compile(t.Expression, t.Limits())
	if err != nil {
		return nil, err
	}
	onError := t.OnError
	if onError == "" {
		onError = OnErrorFail
	}
	return &Step{Expression: x, OnError: onError}, nil
}

// Failure is a failed transform and what its strategy made of it.
type Failure struct {
	// Stage is where the transform failed.
	Stage Stage
	// OnError is the strategy of the block. A route or destination failure counts in
	// queuebox_transform_failures_total{strategy}.
	OnError OnError
	// Err is the transform error (see IsFailure and KindOf).
	Err error
}

// Outcome is the result of the transform stages of one message.
type Outcome struct {
	// Action is what to do with the message.
	Action Action
	// Body is the body to store or deliver when Action is ActionContinue: the output of the last
	// stage that ran, or its input where a stage was skipped.
	Body json.RawMessage
	// Failure is the failed transform, or nil when none failed. With ActionContinue it is a
	// failure that onError Skip passed over.
	Failure *Failure
}

// RunSource runs the source stage on a received body. A nil step stores the body unchanged. The
// error is non-nil only when the evaluation did not finish for a reason other than the
// expression (the context ended): then no strategy applies and the message must not be stored.
func RunSource(ctx context.Context, step *Step, body json.RawMessage, vars Vars) (Outcome, error) {
	if step == nil {
		return Outcome{Action: ActionContinue, Body: body}, nil
	}
	out, err := step.Expression.Evaluate(ctx, body, vars)
	if err == nil {
		return Outcome{Action: ActionContinue, Body: out}, nil
	}
	if !IsFailure(err) {
		return Outcome{}, err
	}
	o := Outcome{Action: Decide(StageSource, step.OnError), Failure: &Failure{Stage: StageSource, OnError: step.OnError, Err: err}}
	if o.Action == ActionContinue {
		o.Body = body
	}
	return o, nil
}

// RunDelivery runs the route stage and then the destination stage on the payload of an outbox
// row, for one delivery attempt. A nil step passes its input on. When the route transform fails
// with Skip, the destination receives the payload as it was and the destination transform does
// not run; when the destination transform fails with Skip, the destination receives the output
// of the route stage (spec/12-transform-payloads.md). The error is non-nil only when an
// evaluation did not finish for a reason other than the expression (the context ended): then no
// strategy applies and the attempt must not count against the row.
func RunDelivery(ctx context.Context, route, destination *Step, payload json.RawMessage, vars Vars) (Outcome, error) {
	body := payload
	for _, s := range []struct {
		stage Stage
		step  *Step
	}{{StageRoute, route}, {StageDestination, destination}} {
		if s.step == nil {
			continue
		}
		out, err := s.step.Expression.Evaluate(ctx, body, vars)
		if err == nil {
			body = out
			continue
		}
		if !IsFailure(err) {
			return Outcome{}, err
		}
		o := Outcome{Action: Decide(s.stage, s.step.OnError), Failure: &Failure{Stage: s.stage, OnError: s.step.OnError, Err: err}}
		if o.Action == ActionContinue {
			o.Body = body
		}
		return o, nil
	}
	return Outcome{Action: ActionContinue, Body: body}, nil
}
