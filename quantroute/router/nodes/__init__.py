"""nodes"""
