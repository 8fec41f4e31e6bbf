# Unit tests of the call pools (src/run/pool.c) and the launch path's
# recognition cache. Included from tests/unit/CMakeLists.txt.
add_executable(test_pool ${CMAKE_CURRENT_LIST_DIR}/test_pool.c)
target_link_libraries(test_pool PRIVATE hcg_core Threads::Threads)
add_test(NAME test_pool COMMAND test_pool)
set_tests_properties(test_pool PROPERTIES LABELS unit TIMEOUT 300)

# The clock's reference pairs under preemption (src/base/clock.c).
add_executable(test_clock ${CMAKE_CURRENT_LIST_DIR}/test_clock.c)
target_link_libraries(test_clock PRIVATE hcg_core)
add_test(NAME test_clock COMMAND test_clock)
set_tests_properties(test_clock PROPERTIES LABELS unit TIMEOUT 300)

# The event rings: what the exit summary names as unwritten, the counts
# hold (src/events/events.c).
add_executable(test_events ${CMAKE_CURRENT_LIST_DIR}/test_events.c)
target_link_libraries(test_events PRIVATE hcg_core Threads::Threads)
add_test(NAME test_events COMMAND test_events)
set_tests_properties(test_events PROPERTIES LABELS unit TIMEOUT 300)
