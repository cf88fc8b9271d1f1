#include "core/error.h"

#include <cstdio>

int main(int argc, char** argv) {
  std::fprintf(stderr, "weft: not built yet\n");
  return 1;
}
