// The interactive terminal: Ctrl-C as llama.cpp's interactive mode reads it (during a reply it
// stops the reply; at the prompt, or a second time before the reply has stopped, it ends the
// chat), and input lines read so that a Ctrl-C interrupts the wait.
#pragma once

#include <optional>
#include <string>

namespace weft::cli::terminal {

// Installs the SIGINT handler (without SA_RESTART, so a read waiting for input returns).
void install_interrupt_handler();
// From here a Ctrl-C stops the reply; end_reply() returns to "a Ctrl-C exits".
void begin_reply();
void end_reply();
bool stop_requested();  // the reply should stop
bool exit_requested();  // the chat should end

// One line from stdin, without its newline; a line ending in '\' goes on with the next one (the
// two joined by a newline), as in llama.cpp. nullopt at end of input or when a Ctrl-C asked to
// exit.
std::optional<std::string> read_line();

}  // namespace weft::cli::terminal
