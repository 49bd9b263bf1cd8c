package dashboards

import (
	"fmt"
	"slices"
	"strings"
)

// A small PromQL parser: enough of the language to find every selector of
// an expression, what function or aggregation each is under, and which
// labels an aggregation keeps. Prometheus' own parser
// (github.com/prometheus/prometheus/promql/parser) would bring the whole
// Prometheus module into go.mod for one test.
//
// Grafana's variables are allowed where dashboards put them: inside label
// matchers' strings ("$namespace") and inside brackets ([$__rate_interval]).

// Expr is a node of a parsed expression.
type Expr interface{ expr() }

type (
	// NumberLit is a number (1, 0.99, 1e3, Inf, NaN).
	NumberLit struct{ Text string }
	// StringLit is a quoted string, unquoted.
	StringLit struct{ Value string }
	// VectorSelector is name{matchers}.
	VectorSelector struct {
		Name     string
		Matchers []Matcher
	}
	// MatrixSelector is a vector selector with a range: name{...}[5m].
	MatrixSelector struct {
		VS    *VectorSelector
		Range string
	}
	// Subquery is expr[range:step].
	Subquery struct {
		Expr  Expr
		Range string
	}
	// Call is a function call.
	Call struct {
		Func string
		Args []Expr
	}
	// Aggregate is sum, max, topk, ... with its grouping.
	Aggregate struct {
		Op       string
		Param    Expr // topk's k, quantile's φ, count_values' label; nil for the others
		Expr     Expr
		Grouping []string
		Without  bool // without (...) rather than by (...)
	}
	// Binary is LHS op RHS with its vector matching.
	Binary struct {
		Op       string
		LHS, RHS Expr
		// On is true with on(...), false with ignoring(...) or neither;
		// Matching says whether either was given.
		Matching bool
		On       bool
		Labels   []string
		// Include are group_left/group_right's labels; GroupRight tells
		// which was given.
		Include    []string
		GroupRight bool
	}
	// Unary is -expr or +expr.
	Unary struct {
		Op   string
		Expr Expr
	}
	// Paren is (expr).
	Paren struct{ Expr Expr }
	// Modified is expr offset d or expr @ t.
	Modified struct{ Expr Expr }
)

// Matcher is label op "value" in a selector.
type Matcher struct {
	Label, Op, Value string
}

func (NumberLit) expr()       {}
func (StringLit) expr()       {}
func (*VectorSelector) expr() {}
func (*MatrixSelector) expr() {}
func (*Subquery) expr()       {}
func (*Call) expr()           {}
func (*Aggregate) expr()      {}
func (*Binary) expr()         {}
func (*Unary) expr()          {}
func (*Paren) expr()          {}
func (*Modified) expr()       {}

// functions are PromQL's functions (Prometheus 3), and the types of their
// arguments where the checks need them.
var functions = map[string]bool{
	"abs": true, "absent": true, "absent_over_time": true, "acos": true, "acosh": true, "asin": true,
	"asinh": true, "atan": true, "atanh": true, "avg_over_time": true, "ceil": true, "changes": true,
	"clamp": true, "clamp_max": true, "clamp_min": true, "cos": true, "cosh": true, "count_over_time": true,
	"day_of_month": true, "day_of_week": true, "day_of_year": true, "days_in_month": true, "deg": true,
	"delta": true, "deriv": true, "double_exponential_smoothing": true, "exp": true, "floor": true,
	"histogram_avg": true, "histogram_count": true, "histogram_fraction": true, "histogram_quantile": true,
	"histogram_stddev": true, "histogram_stdvar": true, "histogram_sum": true, "holt_winters": true,
	"hour": true, "idelta": true, "increase": true, "info": true, "irate": true, "label_join": true,
	"label_replace": true, "last_over_time": true, "ln": true, "log10": true, "log2": true,
	"mad_over_time": true, "max_over_time": true, "min_over_time": true, "minute": true, "month": true,
	"pi": true, "predict_linear": true, "present_over_time": true, "quantile_over_time": true, "rad": true,
	"rate": true, "resets": true, "round": true, "scalar": true, "sgn": true, "sin": true, "sinh": true,
	"sort": true, "sort_by_label": true, "sort_by_label_desc": true, "sort_desc": true, "sqrt": true,
	"stddev_over_time": true, "stdvar_over_time": true, "sum_over_time": true, "tan": true, "tanh": true,
	"time": true, "timestamp": true, "vector": true, "year": true,
}

// aggregations are PromQL's aggregation operators; true for those that
// take a parameter before the expression.
var aggregations = map[string]bool{
	"sum": false, "min": false, "max": false, "avg": false, "group": false, "stddev": false,
	"stdvar": false, "count": false, "count_values": true, "bottomk": true, "topk": true,
	"quantile": true, "limitk": true, "limit_ratio": true,
}

// binaryPrecedence of PromQL's binary operators, higher binds tighter.
var binaryPrecedence = map[string]int{
	"or": 1, "and": 2, "unless": 2,
	"==": 3, "!=": 3, "<=": 3, "<": 3, ">=": 3, ">": 3,
	"+": 4, "-": 4,
	"*": 5, "/": 5, "%": 5, "atan2": 5,
	"^": 6,
}

// keywords may not be metric names.
var keywords = []string{"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "offset", "and", "or", "unless", "atan2"}

type tokenKind int

const (
	tEOF tokenKind = iota
	tIdent
	tNumber
	tString
	tBracket // [...] with its content
	tPunct   // ( ) { } , @ and operators
)

type token struct {
	kind tokenKind
	text string // the identifier, number, unquoted string, bracket content or punctuation
	pos  int
}

func lex(s string) ([]token, error) {
	var out []token
	for i := 0; i < len(s); {
		c := s[i]
		switch {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r':
			i++
		case c == '#':
			for i < len(s) && s[i] != '\n' {
				i++
			}
		case isIdentStart(c):
			j := i
			for j < len(s) && (isIdentStart(s[j]) || isDigit(s[j])) {
				j++
			}
			out = append(out, token{tIdent, s[i:j], i})
			i = j
		case isDigit(c) || (c == '.' && i+1 < len(s) && isDigit(s[i+1])):
			// Numbers, and durations after offset: 0.99, 1e-3, 0x1f, 5m, 1h30m.
			j := i
			for j < len(s) && (isDigit(s[j]) || isIdentStart(s[j]) || s[j] == '.' ||
				((s[j] == '-' || s[j] == '+') && (s[j-1] == 'e' || s[j-1] == 'E') && !strings.HasPrefix(strings.ToLower(s[i:j]), "0x"))) {
				j++
			}
			out = append(out, token{tNumber, s[i:j], i})
			i = j
		case c == '"' || c == '\'' || c == '`':
			j := i + 1
			var b strings.Builder
			for ; j < len(s) && s[j] != c; j++ {
				if s[j] == '\\' && c != '`' {
					j++
					if j == len(s) {
						break
					}
				}
				b.WriteByte(s[j])
			}
			if j >= len(s) {
				return nil, fmt.Errorf("at %d: unterminated string", i)
			}
			out = append(out, token{tString, b.String(), i})
			i = j + 1
		case c == '[':
			j := strings.IndexByte(s[i:], ']')
			if j < 0 {
				return nil, fmt.Errorf("at %d: unclosed [", i)
			}
			out = append(out, token{tBracket, strings.TrimSpace(s[i+1 : i+j]), i})
			i += j + 1
		default:
			op := ""
			for _, o := range []string{"==", "!=", "<=", ">=", "=~", "!~", "(", ")", "{", "}", ",", "@", "+", "-", "*", "/", "%", "^", "<", ">", "="} {
				if strings.HasPrefix(s[i:], o) {
					op = o
					break
				}
			}
			if op == "" {
				return nil, fmt.Errorf("at %d: unexpected %q", i, c)
			}
			out = append(out, token{tPunct, op, i})
			i += len(op)
		}
	}
	return append(out, token{tEOF, "", len(s)}), nil
}

func isIdentStart(c byte) bool {
	return c == '_' || c == ':' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// Parse parses a PromQL expression.
func Parse(s string) (Expr, error) {
	toks, err := lex(s)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	e, err := p.expr(0)
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, fmt.Errorf("at %d: unexpected %q after the expression", t.pos, t.text)
	}
	return e, nil
}

type parser struct {
	toks []token
	i    int
}

func (p *parser) peek() token { return p.toks[p.i] }

func (p *parser) next() token {
	t := p.toks[p.i]
	if t.kind != tEOF {
		p.i++
	}
	return t
}

func (p *parser) isPunct(s string) bool {
	t := p.peek()
	return t.kind == tPunct && t.text == s
}

func (p *parser) expect(s string) error {
	if t := p.next(); t.kind != tPunct || t.text != s {
		return fmt.Errorf("at %d: want %q, got %q", t.pos, s, t.text)
	}
	return nil
}

// binaryOp returns the binary operator at the cursor, if any.
func (p *parser) binaryOp() (string, bool) {
	t := p.peek()
	if t.kind != tPunct && t.kind != tIdent {
		return "", false
	}
	op := t.text
	if t.kind == tIdent {
		op = strings.ToLower(op)
	}
	_, ok := binaryPrecedence[op]
	if t.kind == tIdent && !slices.Contains([]string{"and", "or", "unless", "atan2"}, op) {
		ok = false
	}
	return op, ok
}

// expr parses a binary expression whose operators bind tighter than min.
func (p *parser) expr(min int) (Expr, error) {
	lhs, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		op, ok := p.binaryOp()
		if !ok || binaryPrecedence[op] <= min {
			return lhs, nil
		}
		p.next()
		b := &Binary{Op: op, LHS: lhs}
		if t := p.peek(); t.kind == tIdent && t.text == "bool" {
			p.next()
		}
		if t := p.peek(); t.kind == tIdent && (t.text == "on" || t.text == "ignoring") {
			p.next()
			b.Matching, b.On = true, t.text == "on"
			if b.Labels, err = p.labelList(); err != nil {
				return nil, err
			}
		}
		if t := p.peek(); t.kind == tIdent && (t.text == "group_left" || t.text == "group_right") {
			p.next()
			b.GroupRight = t.text == "group_right"
			if p.isPunct("(") {
				if b.Include, err = p.labelList(); err != nil {
					return nil, err
				}
			}
		}
		prec := binaryPrecedence[op]
		if op == "^" { // right-associative
			prec--
		}
		if b.RHS, err = p.expr(prec); err != nil {
			return nil, err
		}
		lhs = b
	}
}

func (p *parser) unary() (Expr, error) {
	if p.isPunct("-") || p.isPunct("+") {
		op := p.next().text
		e, err := p.unary()
		if err != nil {
			return nil, err
		}
		return &Unary{Op: op, Expr: e}, nil
	}
	e, err := p.primary()
	if err != nil {
		return nil, err
	}
	return p.postfix(e)
}

// postfix parses ranges, subqueries, offset and @ after a primary.
func (p *parser) postfix(e Expr) (Expr, error) {
	for {
		t := p.peek()
		switch {
		case t.kind == tBracket:
			p.next()
			if t.text == "" {
				return nil, fmt.Errorf("at %d: empty range", t.pos)
			}
			if strings.Contains(t.text, ":") {
				e = &Subquery{Expr: e, Range: t.text}
				continue
			}
			vs, ok := e.(*VectorSelector)
			if !ok {
				return nil, fmt.Errorf("at %d: a range [%s] applies to a selector only (a subquery needs [range:step])", t.pos, t.text)
			}
			e = &MatrixSelector{VS: vs, Range: t.text}
		case t.kind == tIdent && t.text == "offset":
			p.next()
			if p.isPunct("-") {
				p.next()
			}
			if d := p.next(); d.kind != tNumber {
				return nil, fmt.Errorf("at %d: offset wants a duration", d.pos)
			}
			e = &Modified{Expr: e}
		case t.kind == tPunct && t.text == "@":
			p.next()
			switch n := p.next(); {
			case n.kind == tNumber:
			case n.kind == tIdent && (n.text == "start" || n.text == "end"):
				if err := p.expect("("); err != nil {
					return nil, err
				}
				if err := p.expect(")"); err != nil {
					return nil, err
				}
			default:
				return nil, fmt.Errorf("at %d: @ wants a time, start() or end()", n.pos)
			}
			e = &Modified{Expr: e}
		default:
			return e, nil
		}
	}
}

func (p *parser) primary() (Expr, error) {
	t := p.next()
	switch t.kind {
	case tNumber:
		return NumberLit{Text: t.text}, nil
	case tString:
		return StringLit{Value: t.text}, nil
	case tPunct:
		switch t.text {
		case "(":
			e, err := p.expr(0)
			if err != nil {
				return nil, err
			}
			if err := p.expect(")"); err != nil {
				return nil, err
			}
			return &Paren{Expr: e}, nil
		case "{":
			p.i--
			return p.selector("")
		}
	case tIdent:
		name := t.text
		lower := strings.ToLower(name)
		if lower == "inf" || lower == "nan" {
			return NumberLit{Text: name}, nil
		}
		if _, ok := aggregations[name]; ok && (p.isPunct("(") || p.peekIdent("by", "without")) {
			return p.aggregate(name)
		}
		if p.isPunct("(") {
			if !functions[name] {
				return nil, fmt.Errorf("at %d: unknown function %s", t.pos, name)
			}
			return p.call(name)
		}
		if slices.Contains(keywords, lower) {
			return nil, fmt.Errorf("at %d: unexpected keyword %s", t.pos, name)
		}
		return p.selector(name)
	}
	return nil, fmt.Errorf("at %d: unexpected %q", t.pos, t.text)
}

func (p *parser) peekIdent(names ...string) bool {
	t := p.peek()
	return t.kind == tIdent && slices.Contains(names, t.text)
}

func (p *parser) selector(name string) (Expr, error) {
	vs := &VectorSelector{Name: name}
	if !p.isPunct("{") {
		return vs, nil
	}
	p.next()
	for !p.isPunct("}") {
		l := p.next()
		if l.kind != tIdent {
			return nil, fmt.Errorf("at %d: want a label name, got %q", l.pos, l.text)
		}
		op := p.next()
		if op.kind != tPunct || !slices.Contains([]string{"=", "!=", "=~", "!~"}, op.text) {
			return nil, fmt.Errorf("at %d: want =, !=, =~ or !~ after %s, got %q", op.pos, l.text, op.text)
		}
		v := p.next()
		if v.kind != tString {
			return nil, fmt.Errorf("at %d: want a quoted value for %s", v.pos, l.text)
		}
		vs.Matchers = append(vs.Matchers, Matcher{Label: l.text, Op: op.text, Value: v.text})
		if p.isPunct(",") {
			p.next()
		} else if !p.isPunct("}") {
			return nil, fmt.Errorf("at %d: want , or } in a selector", p.peek().pos)
		}
	}
	p.next()
	if vs.Name == "" {
		for _, m := range vs.Matchers {
			if m.Label == "__name__" && m.Op == "=" {
				vs.Name = m.Value
			}
		}
	}
	return vs, nil
}

func (p *parser) call(name string) (Expr, error) {
	args, err := p.args()
	if err != nil {
		return nil, err
	}
	return &Call{Func: name, Args: args}, nil
}

// args parses (a, b, ...).
func (p *parser) args() ([]Expr, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var args []Expr
	for !p.isPunct(")") {
		a, err := p.expr(0)
		if err != nil {
			return nil, err
		}
		args = append(args, a)
		if p.isPunct(",") {
			p.next()
		} else if !p.isPunct(")") {
			return nil, fmt.Errorf("at %d: want , or ) in arguments", p.peek().pos)
		}
	}
	p.next()
	return args, nil
}

func (p *parser) aggregate(op string) (Expr, error) {
	a := &Aggregate{Op: op}
	grouping := func() error {
		if !p.peekIdent("by", "without") {
			return nil
		}
		if a.Grouping != nil {
			return fmt.Errorf("at %d: %s has two groupings", p.peek().pos, op)
		}
		a.Without = p.next().text == "without"
		labels, err := p.labelList()
		if labels == nil {
			labels = []string{}
		}
		a.Grouping = labels
		return err
	}
	if err := grouping(); err != nil {
		return nil, err
	}
	args, err := p.args()
	if err != nil {
		return nil, err
	}
	want := 1
	if aggregations[op] {
		want = 2
	}
	if len(args) != want {
		return nil, fmt.Errorf("%s wants %d argument(s), got %d", op, want, len(args))
	}
	if want == 2 {
		a.Param = args[0]
	}
	a.Expr = args[len(args)-1]
	if err := grouping(); err != nil {
		return nil, err
	}
	return a, nil
}

// labelList parses (a, b, ...).
func (p *parser) labelList() ([]string, error) {
	if err := p.expect("("); err != nil {
		return nil, err
	}
	var out []string
	for !p.isPunct(")") {
		t := p.next()
		if t.kind != tIdent {
			return nil, fmt.Errorf("at %d: want a label name, got %q", t.pos, t.text)
		}
		out = append(out, t.text)
		if p.isPunct(",") {
			p.next()
		} else if !p.isPunct(")") {
			return nil, fmt.Errorf("at %d: want , or ) in a label list", p.peek().pos)
		}
	}
	p.next()
	return out, nil
}

// Walk calls fn on e and every expression under it, parents first.
func Walk(e Expr, fn func(Expr)) {
	if e == nil {
		return
	}
	fn(e)
	switch n := e.(type) {
	case *MatrixSelector:
		Walk(n.VS, fn)
	case *Subquery:
		Walk(n.Expr, fn)
	case *Call:
		for _, a := range n.Args {
			Walk(a, fn)
		}
	case *Aggregate:
		Walk(n.Param, fn)
		Walk(n.Expr, fn)
	case *Binary:
		Walk(n.LHS, fn)
		Walk(n.RHS, fn)
	case *Unary:
		Walk(n.Expr, fn)
	case *Paren:
		Walk(n.Expr, fn)
	case *Modified:
		Walk(n.Expr, fn)
	}
}

// Selectors are the vector selectors in e.
func Selectors(e Expr) []*VectorSelector {
	var out []*VectorSelector
	Walk(e, func(e Expr) {
		if vs, ok := e.(*VectorSelector); ok {
			out = append(out, vs)
		}
	})
	return out
}
