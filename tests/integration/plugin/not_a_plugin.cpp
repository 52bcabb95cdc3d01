// A shared library that loads fine but has no PRFAAS_PLUGIN entry points.

extern "C" __attribute__((visibility("default"))) int prfaas_test_not_a_plugin() {
  return 42;
}
