// The values a Jinja template computes with, behaving as the Python objects Jinja2 gives a
// template: none, booleans, 64-bit integers, floats, strings, lists (and tuples), dicts that keep
// their insertion order, namespaces, callables, and Jinja2's default Undefined (prints as
// nothing, is false, iterates as empty; taking its attribute or calling it is an error).
// Strings, lists and dicts are shared on copy, as Python's references are: a namespace set
// inside a loop is the one outside it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace weft::chat::jinja {

class Value;
class Interpreter;
struct CallArgs;

using List = std::vector<Value>;

// A dict in insertion order. Keys are values (strings nearly always); lookup is linear, which is
// what the small dicts of chat messages and tool schemas want.
struct Dict {
  std::vector<std::pair<Value, Value>> items;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
  const Value* find(const std::string& key) const { return find(std::string_view(key)); }
  const Value* find(const char* key) const { return find(std::string_view(key)); }
  void set(Value key, Value value);
};

// Something a template can call: a macro, a built-in function or a bound method.
class Callable {
 public:
  virtual ~Callable() = default;
  virtual Value call(Interpreter& in, CallArgs& args) const = 0;
  virtual std::string_view name() const = 0;
};

class Value {
 public:
  enum class Kind {
    Undefined,
    None,
    Bool,
    Int,
    Float,
    String,
    Array,
    Object,
    Function
  };  // Array: list or tuple; Object: dict or namespace

  Value() = default;  // undefined
  static Value undefined(std::string name = {});
  static Value none();
  Value(bool b) : kind_(Kind::Bool), int_(b) {}
  Value(int v) : kind_(Kind::Int), int_(v) {}
  Value(int64_t v) : kind_(Kind::Int), int_(v) {}
  Value(double v) : kind_(Kind::Float) { float_ = v; }
  Value(std::string s);
  Value(std::string_view s) : Value(std::string(s)) {}
  Value(const char* s) : Value(std::string(s)) {}
  Value(List l, bool tuple = false);
  Value(Dict d, bool is_namespace = false);
  Value(std::shared_ptr<const Callable> c)
      : kind_(Kind::Function), ptr_(std::const_pointer_cast<Callable>(std::move(c))) {}

  Kind kind() const { return kind_; }
  bool is_undefined() const { return kind_ == Kind::Undefined; }
  bool is_none() const { return kind_ == Kind::None; }
  bool is_bool() const { return kind_ == Kind::Bool; }
  bool is_int() const { return kind_ == Kind::Int; }
  bool is_float() const { return kind_ == Kind::Float; }
  bool is_number() const { return kind_ == Kind::Int || kind_ == Kind::Float || kind_ == Kind::Bool; }
  bool is_string() const { return kind_ == Kind::String; }
  bool is_list() const { return kind_ == Kind::Array; }
  bool is_tuple() const { return kind_ == Kind::Array && flag_; }
  // Markup (what |safe and |escape make): adding plain text to it HTML-escapes that text, as
  // markupsafe's Markup.__add__ does even with autoescape off.
  bool is_markup() const { return kind_ == Kind::String && flag_; }
  static Value markup(std::string s);
  bool is_dict() const { return kind_ == Kind::Object && !flag_; }
  bool is_namespace() const { return kind_ == Kind::Object && flag_; }
  bool is_callable() const { return kind_ == Kind::Function; }

  bool as_bool() const { return int_ != 0; }
  int64_t as_int() const { return int_; }  // Int and Bool
  double as_float() const { return kind_ == Kind::Float ? float_ : static_cast<double>(int_); }
  const std::string& str() const;  // String; for Undefined, the name it was looked up by
  const List& list() const { return *static_cast<const List*>(ptr_.get()); }
  List& list_mut() { return *static_cast<List*>(ptr_.get()); }
  const Dict& dict() const { return *static_cast<const Dict*>(ptr_.get()); }  // Dict and namespace
  Dict& dict_mut() { return *static_cast<Dict*>(ptr_.get()); }
  const Callable& callable() const { return *static_cast<const Callable*>(ptr_.get()); }

  // Python's truth value (Undefined is false).
  bool truthy() const;
  // A short name of the kind for error messages: "string", "list", "undefined" ...
  std::string_view type_name() const;

 private:
  Kind kind_ = Kind::Undefined;
  bool flag_ = false;  // List: a tuple; Dict: a namespace; String: markup
  // 32 bytes a value (templates may build long lists): the number, or one shared pointer whose
  // type the kind says: std::string (String, and Undefined's name), List, Dict or Callable.
  union {
    int64_t int_ = 0;
    double float_;
  };
  std::shared_ptr<void> ptr_;
};

// Python's ==, with 1 == 1.0 == True; `depth` bounds the recursion into containers.
bool equals(const Value& a, const Value& b, int depth = 0);
// Python's <; throws a weft::Error (no position: the caller adds it) for kinds that do not order.
bool less(const Value& a, const Value& b, int depth = 0);
// Python's str(): what {{ x }} prints ("None", "True", "1.5", "['a', 1]"; Undefined prints "").
std::string to_str(const Value& v);
// Python's repr(): strings quoted as Python quotes them.
std::string repr(const Value& v, int depth = 0);
// Python's repr() of a float: shortest round trip, "1.0", "1e-05", "1e+16".
std::string float_repr(double d);
// markupsafe's escape: & < > " ' as HTML entities.
std::string html_escape(std::string_view s);

// An error inside the engine before it knows where in the template it happened (a built-in
// filter's bad argument, an unorderable comparison); the interpreter turns it into a weft::Error
// naming the line and column of the expression that raised it.
struct TemplateError {
  std::string message;
};
[[noreturn]] void raise(std::string message);

// The steps of the render running on this thread (the Interpreter installs its counter while it
// renders): recursive walks of values (==, <, repr, tojson) count one a node, so that a value
// built by doubling (a list holding itself twice, forty times over) cannot make one expression
// run for ever. Outside a render nothing is counted.
struct StepCounter {
  size_t steps = 0, max = 0;
};
void set_thread_step_counter(StepCounter* c);
// Counts `n` steps; raises past the counter's max.
void count_step(size_t n = 1);

// The longest text repr() or tojson may build: beyond it a value's text is an error.
inline constexpr size_t kMaxTextBytes = size_t{64} << 20;

// The longest list a template may build or iterate (a string iterates by characters): a million
// items, far beyond any conversation, 32 MiB of values.
inline constexpr size_t kMaxListItems = size_t{1} << 20;
// Raises when a list of `n` items would pass kMaxListItems.
void check_list_size(size_t n);

// How deep values may nest before a recursive walk (==, repr, tojson) gives up: a namespace can
// be set to hold itself.
inline constexpr int kMaxValueDepth = 256;

}  // namespace weft::chat::jinja
