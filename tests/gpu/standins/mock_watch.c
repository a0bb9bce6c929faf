/* An object for tests to load: loading anything new fires hipress' load
 * watch (tests/gpu/host/check_gpu.c). */
__attribute__((visibility("default"))) int hp_mock_watch_loaded(void)
{
    return 1;
}
