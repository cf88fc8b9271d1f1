// Runs a Program over a context of values, as Jinja2's generated code does: scopes (a for
// loop's iteration and a macro call each get their own; if does not), the loop object, macros
// and call blocks, and the built-ins of jinja_builtins.h. Every step, element and output byte is
// counted against Limits, so a hostile template ends in an error, not a hang or an exhausted
// memory.
#pragma once

#include "chat/jinja_ast.h"
#include "chat/jinja_value.h"

#include <ctime>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace weft::chat::jinja {

struct Limits {
  size_t max_output_bytes = size_t{16} << 20;  // the rendered text
  size_t max_string_bytes = size_t{16} << 20;  // any string a template builds
  size_t max_steps = 10'000'000;               // statements, expressions, loop turns, items and bytes built
  int max_call_depth = 64;                     // macros calling macros
};

// The arguments of a call, a filter or a test (after the value it applies to).
struct CallArgs {
  std::vector<Value> args;
  std::vector<std::pair<std::string, Value>> kwargs;

  // Positional `i`, else keyword `name`, else `fallback`.
  Value get(size_t i, std::string_view name, Value fallback = Value()) const;
  // Fails naming `fn` when there are more than `max_positional` arguments or a keyword not in
  // `names`.
  void check(std::string_view fn, size_t max_positional, std::initializer_list<std::string_view> names = {}) const;
};

struct Scope {
  std::unordered_map<std::string, Value> vars;
  std::shared_ptr<Scope> parent;
  const Value* find(const std::string& name) const;
};

class Interpreter {
 public:
  Interpreter(const Limits& limits, std::tm now) : limits_(limits), now_(now) { counter_.max = limits.max_steps; }
  ~Interpreter();
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  // Renders `program` with `context`'s variables over the globals (range, namespace, ...).
  std::string render(const Program& program, const Dict& context);

  Value eval(const Expr& e, const std::shared_ptr<Scope>& scope);
  // Calls a callable value (a macro, a global, a bound method).
  Value call(const Value& callee, CallArgs& args);
  // Renders a body into a string in its own scope (macro bodies, block sets, call and filter blocks).
  std::string capture(const Body& body, const std::shared_ptr<Scope>& scope);

  // Counts `n` steps against Limits::max_steps.
  void charge(size_t n) {
    counter_.steps += n;
    if (counter_.steps > counter_.max) over_steps();
  }
  // A string a template builds: checked against max_string_bytes and charged by size.
  Value make_string(std::string s);
  const Limits& limits() const { return limits_; }
  const std::tm& now() const { return now_; }
  // A namespace() the template made, emptied when the render ends (it may hold itself).
  void track_namespace(const Value& ns) { namespaces_.push_back(ns); }

  // Held for the length of a macro call; raises past Limits::max_call_depth.
  class CallDepth {
   public:
    explicit CallDepth(Interpreter& in);
    ~CallDepth() { --in_.call_depth_; }
    CallDepth(const CallDepth&) = delete;
    CallDepth& operator=(const CallDepth&) = delete;

   private:
    Interpreter& in_;
  };

 private:
  enum class Flow { Normal, Break, Continue };
  Flow exec(const Body& body, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_stmt(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Flow exec_for(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  void exec_set(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void define_macro(const Stmt& s, const std::shared_ptr<Scope>& scope);
  void call_block(const Stmt& s, const std::shared_ptr<Scope>& scope, std::string& out);
  Value eval_inner(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_binary(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_compare(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_call(const Expr& e, const std::shared_ptr<Scope>& scope);
  Value eval_filter(const Expr& e, const Value& input, const std::shared_ptr<Scope>& scope);
  CallArgs eval_args(const Expr& e, const std::shared_ptr<Scope>& scope);
  void append(std::string& out, std::string_view text);
  [[noreturn]] void over_steps() const;

  Limits limits_;
  std::tm now_;
  StepCounter counter_;
  int call_depth_ = 0;
  std::vector<std::shared_ptr<Scope>> keep_alive_;  // scopes macros were defined in
  std::vector<Value> namespaces_;
};

// A value's attribute (`a.name`: methods first, then keys) and item (`a[key]`: keys first, then
// methods), as Jinja2's getattr and getitem; a missing one is undefined.
Value get_attr(const Value& v, const std::string& name);
Value get_item(const Value& v, const Value& key);
// `v` as a sequence of values: a list's items, a dict's keys, a string's characters; Undefined
// is empty; other kinds raise.
List iterate(const Value& v);
// The number of code points of a UTF-8 string.
size_t utf8_length(std::string_view s);

}  // namespace weft::chat::jinja
