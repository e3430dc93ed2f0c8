"""inprocess"""
