// Statements and expressions evaluated. Errors raised below an expression (TemplateError) gain
// the position of the innermost expression that raised them, in eval().
#include "chat/jinja_interpreter.h"

#include "chat/jinja_builtins.h"
#include "core/error.h"

#include <algorithm>
#include <cmath>

namespace weft::chat::jinja {
namespace {

// What using an undefined value says: the name it was looked up by.
[[noreturn]] void undefined_error(const Value& v) {
  raise(v.str().empty() ? std::string("a value is undefined") : v.str());
}

// a op b on 64-bit integers, Python's bigints replaced by an error on overflow.
template <typename Op>
int64_t checked(Op op, int64_t a, int64_t b) {
  int64_t r = 0;
  if (op(a, b, &r)) raise("integer overflow");
  return r;
}

int64_t floor_div(int64_t a, int64_t b) {
  if (b == 0) raise("integer division or modulo by zero");
  if (a == INT64_MIN && b == -1) raise("integer overflow");
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}

int64_t py_mod(int64_t a, int64_t b) {
  if (b == 0) raise("integer division or modulo by zero");
  if (b == -1) return 0;
  const int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// Python's slice indices for a sequence of `n` items.
std::vector<size_t> slice_indices(int64_t n, const Value& start, const Value& stop, const Value& step_v) {
  const int64_t step = step_v.is_none() || step_v.is_undefined() ? 1 : step_v.as_int();
  if (step == 0) raise("slice step cannot be zero");
  auto clamp = [&](const Value& v, int64_t dflt) {
    if (v.is_none() || v.is_undefined()) return dflt;
    if (!v.is_int() && !v.is_bool()) raise("slice indices must be integers or none");
    int64_t i = v.as_int();
    if (i < 0) i += n;
    if (step > 0) return std::clamp<int64_t>(i, 0, n);
    return std::clamp<int64_t>(i, -1, n - 1);
  };
  const int64_t b = clamp(start, step > 0 ? 0 : n - 1);
  const int64_t e = clamp(stop, step > 0 ? n : -1);
  std::vector<size_t> out;
  for (int64_t i = b; step > 0 ? i < e : i > e; i += step) out.push_back(static_cast<size_t>(i));
  return out;
}

// The byte offset of each code point of `s`, and s.size() last.
std::vector<size_t> code_points(std::string_view s) {
  std::vector<size_t> at;
  for (size_t i = 0; i < s.size(); ++i)
    if ((static_cast<unsigned char>(s[i]) & 0xC0) != 0x80) at.push_back(i);
  at.push_back(s.size());
  return at;
}

// A macro: a body with parameters, rendered in a scope whose parent is where it was defined.
class Macro : public Callable {
 public:
  Macro(const Stmt& def, std::weak_ptr<Scope> closure) : def_(def), closure_(std::move(closure)) {}
  std::string_view name() const override { return def_.text; }
  Value call(Interpreter& in, CallArgs& a) const override;

 private:
  const Stmt& def_;
  std::weak_ptr<Scope> closure_;  // the interpreter keeps defining scopes alive while it runs
};

// The body of a {% call %} block, as the macro's `caller()`.
class Caller : public Callable {
 public:
  Caller(const Stmt& block, std::shared_ptr<Scope> scope) : block_(block), scope_(std::move(scope)) {}
  std::string_view name() const override { return "caller"; }
  Value call(Interpreter& in, CallArgs& a) const override {
    auto sc = std::make_shared<Scope>();
    sc->parent = scope_;
    for (size_t i = 0; i < block_.params.size(); ++i) {
      const Param& p = block_.params[i];
      Value v = a.get(i, p.name);
      if (v.is_undefined() && p.default_value) v = in.eval(*p.default_value, sc);
      sc->vars[p.name] = v;
    }
    return in.make_string(in.capture(block_.body, sc));
  }

 private:
  const Stmt& block_;
  std::shared_ptr<Scope> scope_;
};

// loop.cycle(a, b, ...): the argument at loop.index0 modulo their count.
class Cycle : public Callable {
 public:
  explicit Cycle(size_t index0) : index0_(index0) {}
  std::string_view name() const override { return "cycle"; }
  Value call(Interpreter&, CallArgs& a) const override {
    if (a.args.empty()) raise("loop.cycle() needs at least one value");
    return a.args[index0_ % a.args.size()];
  }

 private:
  size_t index0_;
};

}  // namespace

Value Macro::call(Interpreter& in, CallArgs& a) const {
  auto sc = std::make_shared<Scope>();
  sc->parent = closure_.lock();
  if (!sc->parent) raise("macro '" + def_.text + "' outlived the scope it was defined in");
  if (a.args.size() > def_.params.size())
    raise("macro '" + def_.text + "' takes " + std::to_string(def_.params.size()) + " arguments, given " +
          std::to_string(a.args.size()));
  for (const auto& [k, v] : a.kwargs) {
    bool known = k == "caller";
    for (const Param& p : def_.params) known = known || p.name == k;
    if (!known) raise("macro '" + def_.text + "' has no parameter '" + k + "'");
    if (k == "caller") sc->vars["caller"] = v;
  }
  for (size_t i = 0; i < def_.params.size(); ++i) {
    const Param& p = def_.params[i];
    Value v = a.get(i, p.name, Value::undefined("'" + p.name + "' is undefined"));
    if (v.is_undefined() && p.default_value) v = in.eval(*p.default_value, sc);
    sc->vars[p.name] = v;
  }
  const Interpreter::CallDepth depth(in);
  return in.make_string(in.capture(def_.body, sc));
}

Value CallArgs::get(size_t i, std::string_view name, Value fallback) const {
  if (i < args.size()) return args[i];
  for (const auto& [k, v] : kwargs)
    if (k == name) return v;
  return fallback;
}

void CallArgs::check(std::string_view fn, size_t max_positional, std::initializer_list<std::string_view> names) const {
  if (args.size() > max_positional)
    raise(std::string(fn) + " takes at most " + std::to_string(max_positional) + " positional arguments, given " +
          std::to_string(args.size()));
  for (const auto& kv : kwargs)
    if (std::find(names.begin(), names.end(), kv.first) == names.end())
      raise(std::string(fn) + " has no argument '" + kv.first + "'");
}

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

size_t utf8_length(std::string_view s) { return code_points(s).size() - 1; }

List iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::Undefined: return {};
    case Value::Kind::Array: return v.list();
    case Value::Kind::Object: {
      if (v.is_namespace()) raise("a namespace is not iterable");
      List keys;
      for (const auto& kv : v.dict().items) keys.push_back(kv.first);
      return keys;
    }
    case Value::Kind::String: {
      check_list_size(v.str().size() > kMaxListItems ? utf8_length(v.str()) : 0);
      const std::vector<size_t> at = code_points(v.str());
      List out;
      for (size_t i = 0; i + 1 < at.size(); ++i) out.emplace_back(v.str().substr(at[i], at[i + 1] - at[i]));
      return out;
    }
    default: raise("'" + std::string(v.type_name()) + "' is not iterable");
  }
}

Value get_item(const Value& v, const Value& key) {
  if (v.is_undefined()) undefined_error(v);
  if ((v.is_list() || v.is_string()) && (key.is_int() || key.is_bool())) {
    if (v.is_list()) {
      int64_t i = key.as_int(), n = static_cast<int64_t>(v.list().size());
      if (i < 0) i += n;
      return i >= 0 && i < n ? v.list()[static_cast<size_t>(i)] : Value::undefined("list index out of range");
    }
    const std::vector<size_t> at = code_points(v.str());
    int64_t i = key.as_int(), n = static_cast<int64_t>(at.size()) - 1;
    if (i < 0) i += n;
    if (i < 0 || i >= n) return Value::undefined("string index out of range");
    return Value(
        v.str().substr(at[static_cast<size_t>(i)], at[static_cast<size_t>(i) + 1] - at[static_cast<size_t>(i)]));
  }
  if (v.kind() == Value::Kind::Object) {
    if (const Value* found = v.dict().find(key)) return *found;
  }
  if (key.is_string()) {
    Value m = bound_method(v, key.str());
    if (!m.is_undefined()) return m;
  }
  return Value::undefined(std::string("'") + std::string(v.type_name()) + " object' has no attribute " + repr(key));
}

Value get_attr(const Value& v, const std::string& name) {
  if (v.is_undefined()) undefined_error(v);
  if (v.is_namespace()) {
    if (const Value* found = v.dict().find(name)) return *found;
  } else {
    Value m = bound_method(v, name);
    if (!m.is_undefined()) return m;
    if (v.is_dict())
      if (const Value* found = v.dict().find(name)) return *found;
  }
  return Value::undefined(std::string("'") + std::string(v.type_name()) + " object' has no attribute '" + name + "'");
}

Interpreter::CallDepth::CallDepth(Interpreter& in) : in_(in) {
  if (in_.call_depth_ >= in_.limits_.max_call_depth)
    raise("macros call each other deeper than " + std::to_string(in_.limits_.max_call_depth) + " levels");
  ++in_.call_depth_;
}

Interpreter::~Interpreter() {
  // A namespace may hold itself (set ns.me = ns): emptying them all breaks such cycles.
  for (auto& ns : namespaces_) ns.dict_mut().items.clear();
}

Value Interpreter::make_string(std::string s) {
  if (s.size() > limits_.max_string_bytes)
    raise("a string would exceed " + std::to_string(limits_.max_string_bytes) + " bytes");
  charge(1 + s.size() / 4);  // so that the bytes a render builds stay within a few times max_steps
  return Value(std::move(s));
}

void Interpreter::over_steps() const {
  raise("the template ran over " + std::to_string(limits_.max_steps) +
        " steps (a loop that does not end, or one too large for a chat template)");
}

void Interpreter::append(std::string& out, std::string_view text) {
  if (out.size() + text.size() > limits_.max_output_bytes)
    raise("the output would exceed " + std::to_string(limits_.max_output_bytes) + " bytes");
  out += text;
}

std::string Interpreter::render(const Program& program, const Dict& context) {
  auto globals = std::make_shared<Scope>();
  for (auto& [k, v] : global_functions(*this).items) globals->vars[k.str()] = v;
  auto top = std::make_shared<Scope>();
  top->parent = globals;
  for (const auto& [k, v] : context.items)
    if (k.is_string()) top->vars[k.str()] = v;
  std::string out;
  struct Counting {  // value walks on this thread count against this render's steps
    explicit Counting(StepCounter* c) { set_thread_step_counter(c); }
    ~Counting() { set_thread_step_counter(nullptr); }
  } counting(&counter_);
  try {
    exec(program.body, top, out);
  } catch (const TemplateError& e) {  // raised outside any expression (output limits, say)
    fail("chat", "jinja: {}", e.message);
  }
  return out;
}

std::string Interpreter::capture(const Body& body, const std::shared_ptr<Scope>& scope) {
  std::string out;
  exec(body, scope, out);
  return out;
}

Interpreter::Flow Interpreter::exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out) {
  for (const auto& s : body) {
    charge(1);
    const Flow f = exec_stmt(*s, scope, out);
    if (f != Flow::Normal) return f;
  }
  return Flow::Normal;
}

Interpreter::Flow Interpreter::exec_stmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  switch (s.kind) {
    case Stmt::Kind::Text: append(out, s.text); break;
    case Stmt::Kind::Output: {
      const Value v = eval(*s.expr, scope);
      try {
        append(out, v.is_string() ? v.str() : to_str(v));
      } catch (const TemplateError& e) {
        fail("chat", "jinja template line {}, column {}: {}", s.pos.line, s.pos.col, e.message);
      }
      break;
    }
    case Stmt::Kind::If:
      for (size_t i = 0; i < s.conditions.size(); ++i)
        if (eval(*s.conditions[i], scope).truthy()) return exec(s.bodies[i], scope, out);
      return exec(s.else_body, scope, out);
    case Stmt::Kind::For: return exec_for(s, scope, out);
    case Stmt::Kind::Set: exec_set(s, scope); break;
    case Stmt::Kind::Macro: define_macro(s, scope); break;
    case Stmt::Kind::CallBlock: call_block(s, scope, out); break;
    case Stmt::Kind::FilterBlock: {
      auto sc = std::make_shared<Scope>();
      sc->parent = scope;
      const Value text = make_string(capture(s.body, sc));
      const Value v = eval_filter(*s.expr, text, scope);
      append(out, to_str(v));
      break;
    }
    case Stmt::Kind::Break: return Flow::Break;
    case Stmt::Kind::Continue: return Flow::Continue;
  }
  return Flow::Normal;
}

namespace {

void bind(Scope& sc, const Stmt& s, const Value& v) {
  if (!s.unpack) {
    sc.vars[s.targets[0]] = v;
    return;
  }
  const List parts = iterate(v);
  if (parts.size() != s.targets.size())
    raise("cannot unpack " + std::to_string(parts.size()) + " values into " + std::to_string(s.targets.size()) +
          " names");
  for (size_t i = 0; i < parts.size(); ++i) sc.vars[s.targets[i]] = parts[i];
}

}  // namespace

Interpreter::Flow Interpreter::exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  const Value seq = eval(*s.expr, scope);
  List items;
  try {
    items = iterate(seq);
  } catch (const TemplateError& e) {
    fail("chat", "jinja template line {}, column {}: {}", s.expr->pos.line, s.expr->pos.col, e.message);
  }
  charge(2 * items.size());
  if (s.cond) {  // `for x in xs if cond`: the loop (and loop.length) sees only the items that pass
    List kept;
    for (const Value& item : items) {
      auto sc = std::make_shared<Scope>();
      sc->parent = scope;
      try {
        bind(*sc, s, item);
      } catch (const TemplateError& e) {
        fail("chat", "jinja template line {}, column {}: {}", s.pos.line, s.pos.col, e.message);
      }
      if (eval(*s.cond, sc).truthy()) kept.push_back(item);
    }
    items = std::move(kept);
  }
  if (items.empty()) return exec(s.else_body, scope, out);
  const int64_t n = static_cast<int64_t>(items.size());
  for (int64_t i = 0; i < n; ++i) {
    charge(1);
    auto sc = std::make_shared<Scope>();  // one per iteration: a set inside does not outlive it
    sc->parent = scope;
    try {
      bind(*sc, s, items[static_cast<size_t>(i)]);
    } catch (const TemplateError& e) {
      fail("chat", "jinja template line {}, column {}: {}", s.pos.line, s.pos.col, e.message);
    }
    Dict loop;
    loop.items = {
        {Value("index"), Value(i + 1)},
        {Value("index0"), Value(i)},
        {Value("revindex"), Value(n - i)},
        {Value("revindex0"), Value(n - i - 1)},
        {Value("first"), Value(i == 0)},
        {Value("last"), Value(i == n - 1)},
        {Value("length"), Value(n)},
        {Value("depth"), Value(1)},
        {Value("depth0"), Value(0)},
        {Value("previtem"),
         i > 0 ? items[static_cast<size_t>(i - 1)] : Value::undefined("'loop.previtem' is undefined")},
        {Value("nextitem"),
         i + 1 < n ? items[static_cast<size_t>(i + 1)] : Value::undefined("'loop.nextitem' is undefined")},
        {Value("cycle"), Value(std::make_shared<Cycle>(static_cast<size_t>(i)))},
    };
    sc->vars["loop"] = Value(std::move(loop));
    if (exec(s.body, sc, out) == Flow::Break) break;
  }
  return Flow::Normal;
}

void Interpreter::exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  auto where = [&](const TemplateError& e) -> void {
    fail("chat", "jinja template line {}, column {}: {}", s.pos.line, s.pos.col, e.message);
  };
  if (!s.text.empty()) {  // {% set ns.attr = value %}
    const Value* ns = scope->find(s.targets[0]);
    if (!ns || !ns->is_namespace())
      fail("chat", "jinja template line {}, column {}: cannot set '{}.{}': '{}' is not a namespace()", s.pos.line,
           s.pos.col, s.targets[0], s.text, s.targets[0]);
    Value target = *ns;  // shares the namespace's dict
    target.dict_mut().set(Value(s.text), eval(*s.expr, scope));
    return;
  }
  Value v;
  if (s.expr) {
    v = eval(*s.expr, scope);
  } else {
    auto sc = std::make_shared<Scope>();
    sc->parent = scope;
    v = make_string(capture(s.body, sc));
    if (s.cond) v = eval_filter(*s.cond, v, scope);
  }
  try {
    bind(*scope, s, v);
  } catch (const TemplateError& e) {
    where(e);
  }
}

void Interpreter::define_macro(const Stmt& s, const std::shared_ptr<Scope>& scope) {
  keep_alive_.push_back(scope);
  scope->vars[s.text] = Value(std::make_shared<Macro>(s, scope));
}

void Interpreter::call_block(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out) {
  const Expr& call_expr = *s.expr;
  const Value callee = eval(*call_expr.a, scope);
  CallArgs args = eval_args(call_expr, scope);
  args.kwargs.emplace_back("caller", Value(std::make_shared<Caller>(s, scope)));
  try {
    append(out, to_str(call(callee, args)));
  } catch (const TemplateError& e) {
    fail("chat", "jinja template line {}, column {}: {}", s.pos.line, s.pos.col, e.message);
  }
}

Value Interpreter::eval(const Expr& e, const std::shared_ptr<Scope>& scope) {
  charge(1);
  try {
    return eval_inner(e, scope);
  } catch (const TemplateError& err) {
    fail("chat", "jinja template line {}, column {}: {}", e.pos.line, e.pos.col, err.message);
  }
}

CallArgs Interpreter::eval_args(const Expr& e, const std::shared_ptr<Scope>& scope) {
  CallArgs a;
  for (const auto& x : e.items) a.args.push_back(x ? eval(*x, scope) : Value::none());
  for (const auto& [k, x] : e.kwargs) a.kwargs.emplace_back(k, eval(*x, scope));
  return a;
}

Value Interpreter::call(const Value& callee, CallArgs& args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (!callee.is_callable()) raise("'" + std::string(callee.type_name()) + "' object is not callable");
  return callee.callable().call(*this, args);
}

Value Interpreter::eval_filter(const Expr& e, const Value& input, const std::shared_ptr<Scope>& scope) {
  const Value base = e.a ? eval_filter(*e.a, input, scope) : input;
  CallArgs args = eval_args(e, scope);
  try {
    return apply_filter(*this, e.name, base, args);
  } catch (const TemplateError& err) {
    fail("chat", "jinja template line {}, column {}: {}", e.pos.line, e.pos.col, err.message);
  }
}

Value Interpreter::eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope) {
  switch (e.kind) {
    case Expr::Kind::Literal: return e.value;
    case Expr::Kind::Name: {
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case Expr::Kind::ListLiteral:
    case Expr::Kind::TupleLiteral: {
      List items;
      for (const auto& x : e.items) items.push_back(eval(*x, scope));
      return Value(std::move(items), e.kind == Expr::Kind::TupleLiteral);
    }
    case Expr::Kind::DictLiteral: {
      Dict d;
      for (size_t i = 0; i + 1 < e.items.size(); i += 2) d.set(eval(*e.items[i], scope), eval(*e.items[i + 1], scope));
      return Value(std::move(d));
    }
    case Expr::Kind::Unary: {
      const Value v = eval(*e.a, scope);
      if (e.name == "not") return Value(!v.truthy());
      if (v.is_undefined()) undefined_error(v);
      if (!v.is_number()) raise("bad operand type for unary " + e.name + ": '" + std::string(v.type_name()) + "'");
      if (e.name == "+") return v.is_bool() ? Value(v.as_int()) : v;
      if (v.is_float()) return Value(-v.as_float());
      if (v.as_int() == INT64_MIN) raise("integer overflow");
      return Value(-v.as_int());
    }
    case Expr::Kind::Binary: return eval_binary(e, scope);
    case Expr::Kind::Compare: return eval_compare(e, scope);
    case Expr::Kind::Ternary:
      if (eval(*e.b, scope).truthy()) return eval(*e.a, scope);
      return e.c ? eval(*e.c, scope) : Value::undefined("the ternary's condition was false and it has no else");
    case Expr::Kind::Attr: return get_attr(eval(*e.a, scope), e.name);
    case Expr::Kind::Index: {
      const Value base = eval(*e.a, scope);
      return get_item(base, eval(*e.b, scope));
    }
    case Expr::Kind::Slice: {
      const Value base = eval(*e.a, scope);
      Value parts[3];
      for (size_t i = 0; i < 3; ++i) parts[i] = e.items[i] ? eval(*e.items[i], scope) : Value::none();
      if (base.is_undefined()) undefined_error(base);
      if (base.is_list()) {
        List out;
        for (size_t i : slice_indices(static_cast<int64_t>(base.list().size()), parts[0], parts[1], parts[2]))
          out.push_back(base.list()[i]);
        charge(out.size());
        return Value(std::move(out), base.is_tuple());
      }
      if (base.is_string()) {
        const std::vector<size_t> at = code_points(base.str());
        std::string out;
        for (size_t i : slice_indices(static_cast<int64_t>(at.size()) - 1, parts[0], parts[1], parts[2]))
          out.append(base.str(), at[i], at[i + 1] - at[i]);
        return make_string(std::move(out));
      }
      raise("'" + std::string(base.type_name()) + "' cannot be sliced");
    }
    case Expr::Kind::Call: return eval_call(e, scope);
    case Expr::Kind::Filter: {
      const Value base = e.a ? eval(*e.a, scope) : Value();
      CallArgs args = eval_args(e, scope);
      return apply_filter(*this, e.name, base, args);
    }
    case Expr::Kind::Test: {
      const Value v = eval(*e.a, scope);
      CallArgs args = eval_args(e, scope);
      return Value(apply_test(*this, e.name, v, args) != e.negated);
    }
  }
  raise("unknown expression");
}

Value Interpreter::eval_call(const Expr& e, const std::shared_ptr<Scope>& scope) {
  const Value callee = eval(*e.a, scope);
  CallArgs args = eval_args(e, scope);
  return call(callee, args);
}

namespace {

Value arithmetic(Interpreter& in, const std::string& op, const Value& l, const Value& r) {
  if (l.is_undefined()) undefined_error(l);
  if (r.is_undefined()) undefined_error(r);
  auto unsupported = [&]() -> Value {
    raise("unsupported operand types for " + op + ": '" + std::string(l.type_name()) + "' and '" +
          std::string(r.type_name()) + "'");
  };
  if (op == "+") {
    if (l.is_markup() != r.is_markup() && l.is_string() && r.is_string())  // the plain side is escaped
      return Value::markup(
          in.make_string(l.is_markup() ? l.str() + html_escape(r.str()) : html_escape(l.str()) + r.str()).str());
    if (l.is_string() && r.is_string()) {
      Value sum = in.make_string(l.str() + r.str());
      return l.is_markup() ? Value::markup(sum.str()) : sum;
    }
    if (l.is_list() && r.is_list()) {
      check_list_size(l.list().size() + r.list().size());
      in.charge(4 * (l.list().size() + r.list().size()));
      List out = l.list();
      out.insert(out.end(), r.list().begin(), r.list().end());
      return Value(std::move(out), l.is_tuple());
    }
  }
  if (op == "*" && ((l.is_string() || l.is_list()) && (r.is_int() || r.is_bool()))) {
    const int64_t n = std::max<int64_t>(0, r.as_int());
    const size_t unit = l.is_string() ? l.str().size() : l.list().size();
    const size_t limit = l.is_string() ? in.limits().max_string_bytes : kMaxListItems;
    if (unit != 0 && static_cast<uint64_t>(n) > limit / unit)
      raise("repeating a " + std::string(l.type_name()) + " " + std::to_string(n) + " times is too large");
    const size_t total = unit * static_cast<size_t>(n);
    in.charge(l.is_string() ? total / 4 + 1 : 4 * total + 1);
    if (total == 0) return l.is_string() ? in.make_string("") : Value(List{}, l.is_tuple());
    if (l.is_string()) {
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += l.str();
      return in.make_string(std::move(out));
    }
    List out;
    for (int64_t i = 0; i < n; ++i) out.insert(out.end(), l.list().begin(), l.list().end());
    return Value(std::move(out), l.is_tuple());
  }
  if (op == "*" && (r.is_string() || r.is_list()) && (l.is_int() || l.is_bool())) return arithmetic(in, op, r, l);
  if (op == "%" && l.is_string()) {
    CallArgs a;
    if (r.is_tuple())
      a.args = r.list();
    else
      a.args.push_back(r);
    return apply_filter(in, "format", l, a);
  }
  if (!l.is_number() || !r.is_number()) return unsupported();
  const bool ints = !l.is_float() && !r.is_float();
  if (ints) {
    const int64_t a = l.as_int(), b = r.as_int();
    auto add = [](int64_t x, int64_t y, int64_t* out) { return __builtin_add_overflow(x, y, out); };
    auto sub = [](int64_t x, int64_t y, int64_t* out) { return __builtin_sub_overflow(x, y, out); };
    auto mul = [](int64_t x, int64_t y, int64_t* out) { return __builtin_mul_overflow(x, y, out); };
    if (op == "+") return Value(checked(add, a, b));
    if (op == "-") return Value(checked(sub, a, b));
    if (op == "*") return Value(checked(mul, a, b));
    if (op == "//") return Value(floor_div(a, b));
    if (op == "%") return Value(py_mod(a, b));
    if (op == "**" && b >= 0) {
      // By squaring: a base of -1, 0 or 1 with a huge exponent ends at once, and the sign is
      // right. A square that overflows while bits remain means the result overflows too.
      int64_t out = 1, base = a;
      for (int64_t e = b; e != 0; e >>= 1) {
        in.charge(1);
        if ((e & 1) && __builtin_mul_overflow(out, base, &out)) raise("integer overflow");
        if ((e >> 1) != 0 && __builtin_mul_overflow(base, base, &base)) raise("integer overflow");
      }
      return Value(out);
    }
  }
  const double a = l.as_float(), b = r.as_float();
  if (op == "+") return Value(a + b);
  if (op == "-") return Value(a - b);
  if (op == "*") return Value(a * b);
  if (op == "/" || op == "//" || op == "%") {
    if (b == 0) raise("division by zero");
    if (op == "/") return Value(a / b);
    if (op == "//") return Value(std::floor(a / b));
    const double m = std::fmod(a, b);
    return Value(m != 0 && ((m < 0) != (b < 0)) ? m + b : m);
  }
  if (op == "**") return Value(std::pow(a, b));
  return unsupported();
}

}  // namespace

Value Interpreter::eval_binary(const Expr& e, const std::shared_ptr<Scope>& scope) {
  if (e.name == "and") {
    Value l = eval(*e.a, scope);
    return l.truthy() ? eval(*e.b, scope) : l;
  }
  if (e.name == "or") {
    Value l = eval(*e.a, scope);
    return l.truthy() ? l : eval(*e.b, scope);
  }
  const Value l = eval(*e.a, scope);
  const Value r = eval(*e.b, scope);
  if (e.name == "~") return make_string(to_str(l) + to_str(r));
  return arithmetic(*this, e.name, l, r);
}

Value Interpreter::eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope) {
  Value l = eval(*e.items[0], scope);
  for (size_t i = 0; i < e.ops.size(); ++i) {
    Value r = eval(*e.items[i + 1], scope);
    const std::string& op = e.ops[i];
    bool ok;
    if (op == "==")
      ok = equals(l, r);
    else if (op == "!=")
      ok = !equals(l, r);
    else if (op == "in")
      ok = contains(r, l);
    else if (op == "not in")
      ok = !contains(r, l);
    else {
      if (l.is_undefined()) undefined_error(l);
      if (r.is_undefined()) undefined_error(r);
      if (op == "<")
        ok = less(l, r);
      else if (op == ">")
        ok = less(r, l);
      else if (op == "<=")
        ok = !less(r, l);
      else
        ok = !less(l, r);
    }
    if (!ok) return Value(false);
    l = std::move(r);
  }
  return Value(true);
}

}  // namespace weft::chat::jinja
