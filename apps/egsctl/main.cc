// egsctl: the kubectl-like CLI of EGS. Wires the real clock and process streams to RunEgsctl.
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "common/clock.h"
#include "egsctl/egsctl.h"

int main(int argc, char** argv) {
  try {
    egs::common::RealClock clock;
    std::vector<std::string> args(argv + 1, argv + argc);
    return egs::egsctl::RunEgsctl(std::move(args), std::cout, std::cerr, clock);
  } catch (const std::exception& e) {
    std::cerr << "error: " << e.what() << "\n";
    return egs::egsctl::kExitError;
  }
}
