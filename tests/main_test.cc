// The single doctest runner for every unit test of etrun (one binary, as ninja_test).
#define DOCTEST_CONFIG_IMPLEMENT_WITH_MAIN
#include <doctest/doctest.h>
